"""Evaluate agents: matches, round-robin tournaments with Elo ratings, a run's learning curve.

    python evaluate.py match ckpt:runs/hex6@latest,sims=50 mcts:sims=100 --games=100
    python evaluate.py match ckpt:runs/hex6,seconds=1 mcts:seconds=1 --games=40    # equal time
    python evaluate.py tournament random mcts:sims=50 minimax:depth=4 --game=tictactoe --games=20
    python evaluate.py curve runs/hex6 --games=64

Agents are specs (azjax/agents.py): `ckpt:PATH[@STEP|@latest][,sims=..,search=puct|gumbel,
rollout=none|random|policy,p_r=..,lambda=..,eps=..,seconds=..]`, `mcts[:sims=..]`, `random`,
`minimax[:depth=D]`, `human`, `gtp:"COMMAND"`. The game comes from --game (with --size, --swap,
--rows, --cols, --connect) or else from the first ckpt agent's checkpoint; a checkpoint of
another game or size is refused. Colours alternate: the first agent moves first in the
even-numbered games.

- match: wins / draws / losses of the first agent with 95% confidence intervals (normal
  approximation, seed 000 Appendix A), overall and split by who moved first; simulations,
  expected rollouts and seconds per move of each agent (seed 000 Table 5.6).
- tournament: every pair plays --games games; the win-ratio matrix (wins + draws/2) as a heatmap
  (seed 000 Figure 5.3) and maximum-likelihood Elo ratings (mean 0) with standard errors.
- curve: every checkpoint of a run against the previous one (the first against the untrained
  network; both epsilon-greedy) and against pure MCTS with twice the simulations, as in the
  training loop's evaluation; plotted like seed 000 Figures 5.1 and 5.2.

Writes JSON and PNGs to --out (default runs/eval/<command>-<time>). Exit code 2 for bad input
(unknown agents or options, missing checkpoints, a checkpoint of another game).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np

import games
from azjax.config import parse_value

# ---- command line --------------------------------------------------------------------------------


def _game_option_types() -> dict[str, type]:
    """Every game option of every game, with its type (e.g. size: int, swap: bool)."""
    types: dict[str, type] = {}
    for name in games.names():
        for f in dataclasses.fields(games.game_class(name)):
            types.setdefault(f.name, type(f.default))
    return types


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    common.add_argument("--out", default=None, help="output folder (default runs/eval/...)")
    game = common.add_argument_group("game (default: from the first ckpt agent)")
    game.add_argument("--game", default=None, help=f"one of {', '.join(games.names())}")
    for name in _game_option_types():
        game.add_argument(f"--{name}", default=None, help="game option")

    match = commands.add_parser("match", parents=[common], help="two agents, N games")
    match.add_argument("agents", nargs=2, metavar="AGENT")
    match.add_argument("--games", type=int, default=100, help="games (default 100)")
    tour = commands.add_parser("tournament", parents=[common], help="round robin, Elo")
    tour.add_argument("agents", nargs="+", metavar="AGENT")
    tour.add_argument("--games", type=int, default=20, help="games per pair (default 20)")
    curve = commands.add_parser("curve", parents=[common], help="a run's checkpoints")
    curve.add_argument("run", metavar="RUN_DIR")
    curve.add_argument("--games", type=int, default=64, help="games per match (default 64)")
    curve.add_argument("--sims", type=int, default=None,
                       help="the network's simulations (default: the run's)")
    curve.add_argument("--mcts_sims", type=int, default=None,
                       help="pure MCTS simulations (default: twice the network's)")
    curve.add_argument("--epsilon", type=float, default=None,
                       help="epsilon-greedy against the previous checkpoint (default: the run's "
                            "eval_epsilon)")
    return parser


def resolve_game(args) -> games.Game:
    """The game from --game and its options, or else from the first ckpt agent's checkpoint."""
    from azjax.agents import checkpoint_config

    types = _game_option_types()
    options = {n: parse_value(n, getattr(args, n), types[n])
               for n in types if getattr(args, n) is not None}
    if args.game is not None:
        return games.make(args.game, **options)
    for spec in args.agents:
        config = checkpoint_config(spec)
        if config is not None:
            return games.make(config.game, **{**config.game_options, **options})
    raise ValueError("give --game=NAME: no ckpt: agent to take the game from")


def out_folder(args) -> str:
    """--out, or runs/eval/<command>-<time>; made when the first file is written."""
    return args.out or os.path.join(
        "runs", "eval", f"{args.command}-{time.strftime('%Y%m%d-%H%M%S')}")


def _write_json(folder: str, name: str, data: dict) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
    return path


def _check_games(n: int) -> None:
    if n < 1:
        raise ValueError(f"--games must be at least 1, got {n}")


# ---- match ---------------------------------------------------------------------------------------
def result_record(result) -> dict:
    """W/D/L counts and 95% intervals of a MatchResult, overall and by who moved first."""
    from azjax.stats import proportion_ci, score_ci

    def part(w, d, l):
        n = w + d + l
        return dict(games=n, wins=w, draws=d, losses=l, win=list(proportion_ci(w, n)),
                    draw=list(proportion_ci(d, n)), loss=list(proportion_ci(l, n)),
                    score=list(score_ci(w, d, l)))

    return dict(overall=part(result.wins, result.draws, result.losses),
                first=part(*result.first), second=part(*result.second))


def outcome_record(names, outcome) -> dict:
    return dict(agents=list(names), result=result_record(outcome.result),
                per_move={n: dataclasses.asdict(s) for n, s in zip("AB", outcome.stats)},
                wall_seconds=round(outcome.wall_seconds, 2))


def format_match(record: dict) -> str:
    a, b = record["agents"]
    lines = [f"A = {a}\nB = {b}",
             f"{'A moved':<10}{'games':>6}  {'win':<13}{'draw':<13}{'loss':<13}score"]
    for part in ("first", "second", "overall"):
        r = record["result"][part]
        cells = "".join(f"{r[k][0]:.2f} ± {r[k][1]:.2f}  " for k in ("win", "draw", "loss"))
        lines.append(f"{part:<10}{r['games']:>6}  {cells}{r['score'][0]:.3f} ± {r['score'][1]:.3f}")
    lines.append(format_per_move(record["per_move"], {"A": a, "B": b}))
    return "\n".join(lines)


def format_per_move(per_move: dict, names: dict) -> str:
    """Simulations, rollouts and seconds per move (seed 000 Table 5.6); '-' where not known."""
    def cell(v, fmt):
        return "-" if v is None else format(v, fmt)

    lines = [f"{'per move':<10}{'sims':>8}{'rollouts':>10}{'s/move':>10}{'budget s':>10}"]
    for key, s in per_move.items():
        lines.append(f"{key:<10}{cell(s['simulations'], 'd'):>8}{cell(s['rollouts'], '.1f'):>10}"
                     f"{cell(s['seconds'], '.4f'):>10}{cell(s['budget'], '.4f'):>10}  {names[key]}")
    return "\n".join(lines)


def run_match(game, specs: list[str], num_games: int, seed: int, folder: str) -> dict:
    import jax

    from azjax.agents import parse_agent, play_games

    _check_games(num_games)
    agents = [parse_agent(s, game) for s in specs]
    try:
        outcome = play_games(game, *agents, num_games, jax.random.PRNGKey(seed))
    finally:
        for agent in agents:
            agent.close()
    record = dict(game=game.name, game_options=game.options, games=num_games, seed=seed,
                  **outcome_record(specs, outcome))
    print(format_match(record))
    print(f"wrote {_write_json(folder, 'match.json', record)}")
    return record


# ---- tournament ----------------------------------------------------------------------------------
def run_tournament(game, specs: list[str], num_games: int, seed: int, folder: str) -> dict:
    import jax

    from azjax.agents import parse_agent

    _check_games(num_games)
    if len(specs) < 2:
        raise ValueError("tournament: give at least two agents")
    agents = [parse_agent(s, game) for s in specs]
    try:
        record = round_robin(game, _unique(specs), agents, num_games, jax.random.PRNGKey(seed))
    finally:
        for agent in agents:
            agent.close()
    record["seed"] = seed
    print(format_tournament(record))
    plot_heatmap(record, os.path.join(folder, "win_ratio.png"))
    print(f"wrote {_write_json(folder, 'tournament.json', record)} and win_ratio.png")
    return record


def round_robin(game, names: list[str], agents: list, num_games: int, key, log=None) -> dict:
    """Every pair of `agents` (called `names`) plays `num_games` games, colours alternating.

    `seconds` agents are calibrated once, for the batch every match plays. Returns the record
    `evaluate.py tournament` writes: the matches, the win-ratio matrix and Elo ratings."""
    import jax

    from azjax.agents import calibrate, play_games

    log = log or (lambda text: print(text, flush=True))
    batch = 1 if any(a.stateful for a in agents) else (num_games + 1) // 2
    agents = [calibrate(a, game, batch, jax.random.fold_in(key, i)) for i, a in enumerate(agents)]
    num = len(agents)
    points, played = np.zeros((num, num)), np.zeros((num, num))
    matches = []
    for i in range(num):
        for j in range(i + 1, num):
            k = jax.random.fold_in(key, 1000 + i * num + j)
            outcome = play_games(game, agents[i], agents[j], num_games, k)
            r = outcome.result
            points[i, j], points[j, i] = r.wins + 0.5 * r.draws, r.losses + 0.5 * r.draws
            played[i, j] = played[j, i] = r.games
            matches.append(outcome_record((names[i], names[j]), outcome))
            log(f"{names[i]} vs {names[j]}: W{r.wins} D{r.draws} L{r.losses} "
                f"({outcome.wall_seconds:.1f} s)")
    return dict(game=game.name, game_options=game.options, games_per_pair=num_games,
                agents=list(names), matches=matches, **tournament_summary(names, points, played))


def _unique(specs: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for s in specs:
        seen[s] = seen.get(s, 0) + 1
        out.append(s if seen[s] == 1 else f"{s} #{seen[s]}")
    return out


def tournament_summary(names, points: np.ndarray, played: np.ndarray) -> dict:
    """Win-ratio matrix and Elo ratings (one virtual draw per pair if the MLE is infinite)."""
    from azjax.stats import Z95, elo, is_connected

    prior = 0.0 if is_connected(points, played) else 1.0
    ratings = elo(points, played, prior_draws=prior)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(played > 0, points / played, np.nan)
    return dict(
        win_ratio=[[None if np.isnan(v) else float(v) for v in row] for row in ratio],
        elo={n: dict(elo=float(e), stderr=float(s), ci95=float(Z95 * s))
             for n, e, s in zip(names, ratings.elo, ratings.stderr)},
        elo_prior_draws=prior,
    )


def format_tournament(record: dict) -> str:
    names = record["agents"]
    lines = ["win ratio (row against column, wins + draws/2):"]
    lines.append(" " * 4 + "".join(f"{j:>7}" for j in range(len(names))))
    for i, row in enumerate(record["win_ratio"]):
        lines.append(f"{i:>3} " + "".join(f"{'-' if v is None else f'{v:.2f}':>7}" for v in row)
                     + f"  {names[i]}")
    lines.append("Elo (maximum likelihood, mean 0, ± 95%):")
    if record["elo_prior_draws"]:
        lines.append("  (some agent won or lost every game: one virtual draw added to every pair)")
    for name, e in sorted(record["elo"].items(), key=lambda kv: -kv[1]["elo"]):
        lines.append(f"  {e['elo']:8.1f} ± {e['ci95']:6.1f}  {name}")
    return "\n".join(lines)


def _pyplot(path: str):
    """matplotlib's pyplot with the Agg backend; makes the folder of `path`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_heatmap(record: dict, path: str, title: str | None = None) -> None:
    """The win-ratio matrix as seed 000 Figure 5.3: the row agent's ratio against the column's."""
    plt = _pyplot(path)
    names = [n if len(n) <= 28 else n[:27] + "…" for n in record["agents"]]
    ratio = np.array([[np.nan if v is None else v for v in row] for row in record["win_ratio"]])
    size = 2.5 + 0.7 * len(names)
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    image = ax.imshow(ratio, vmin=0.0, vmax=1.0, cmap="viridis")
    for i in range(len(names)):
        for j in range(len(names)):
            if not np.isnan(ratio[i, j]):
                ax.text(j, i, f"{ratio[i, j]:.2f}", ha="center", va="center",
                        color="white" if ratio[i, j] < 0.5 else "black", fontsize=9)
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_xlabel("opponent")
    ax.set_ylabel("agent")
    fig.colorbar(image, ax=ax, label="(wins + draws/2) / games")
    ax.set_title(title or f"{record['game']}: {record['games_per_pair']} games per pair",
                 fontsize=10)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)


# ---- curve ---------------------------------------------------------------------------------------
def run_curve(run_dir: str, num_games: int, seed: int, folder: str, sims=None, mcts_sims=None,
              epsilon=None, game=None) -> dict:
    import jax

    from azjax import SearchSpec
    from azjax.agents import SearchSetup, network_apply, play_games, search_agent
    from azjax.checkpoint import initial_variables, load_checkpoint, read_config, steps

    _check_games(num_games)
    config = read_config(run_dir)  # the latest; raises for a folder without checkpoints
    if game is not None and config.make_game() != game:
        raise ValueError(f"{run_dir!r} is a {config.game} {dict(config.game_options)} run, "
                         f"not {game.name} {game.options}")
    game = config.make_game()
    apply = network_apply(config)
    spec = SearchSpec.from_config(config, num_simulations=sims or config.num_simulations)
    mcts_sims = mcts_sims or 2 * spec.num_simulations
    epsilon = config.eval_epsilon if epsilon is None else epsilon
    # one agent of each kind: their searches compile once for all checkpoints
    net = search_agent("network", SearchSetup(game, spec, apply))
    greedy = search_agent("network", SearchSetup(game, spec, apply, epsilon))
    mcts = search_agent("mcts", SearchSetup(game, SearchSpec.pure_mcts(mcts_sims), None))
    trained = training_games(run_dir)
    previous = initial_variables(config)
    key = jax.random.PRNGKey(seed)
    rows = []
    for step in steps(run_dir):
        _, variables, _ = load_checkpoint(run_dir, step)
        k_mcts, k_prev = jax.random.split(jax.random.fold_in(key, step))
        m = play_games(game, dataclasses.replace(net, variables=variables), mcts, num_games,
                       k_mcts).result
        p = play_games(game, dataclasses.replace(greedy, variables=variables),
                       dataclasses.replace(greedy, variables=previous), num_games, k_prev).result
        rows.append(dict(step=step, training_games=trained.get(step),
                         vs_mcts=result_record(m), vs_previous=result_record(p)))
        print(f"checkpoint {step}: vs MCTS-{mcts_sims} {m.score:.2f} (W{m.wins} D{m.draws} "
              f"L{m.losses}), vs previous {p.score:.2f} (W{p.wins} D{p.draws} L{p.losses})",
              flush=True)
        previous = variables
    record = dict(run=os.path.abspath(run_dir), game=config.game,
                  game_options=dict(config.game_options), games=num_games, seed=seed,
                  simulations=spec.num_simulations, mcts_simulations=mcts_sims, epsilon=epsilon,
                  curve=rows)
    plot_curve(record, os.path.join(folder, "curve.png"))
    print(f"wrote {_write_json(folder, 'curve.json', record)} and curve.png")
    return record


def training_games(run_dir: str) -> dict[int, int]:
    """Cumulative self-play games by iteration, from metrics.jsonl ({} if it is missing)."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return {}
    total, out = 0, {}
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            total += row.get("games", 0)
            out[row["iteration"]] = total
    return out


def plot_curve(record: dict, path: str) -> None:
    """Score per checkpoint, like seed 000 Figures 5.1/5.2: vs pure MCTS blue, vs previous red."""
    plt = _pyplot(path)
    rows = record["curve"]
    use_games = all(r["training_games"] is not None for r in rows)
    x = [r["training_games"] if use_games else r["step"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for name, colour, label in (
            ("vs_mcts", "tab:blue", f"vs pure MCTS ({record['mcts_simulations']} sims)"),
            ("vs_previous", "tab:red", f"vs previous checkpoint (ε = {record['epsilon']})")):
        score = np.array([r[name]["overall"]["score"][0] for r in rows])
        half = np.array([r[name]["overall"]["score"][1] for r in rows])
        ax.plot(x, score, "o-", color=colour, ms=3, label=label)
        ax.fill_between(x, np.clip(score - half, 0, 1), np.clip(score + half, 0, 1),
                        color=colour, alpha=0.15)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_ylim(0, 1)
    ax.set_xlabel("self-play games" if use_games else "iteration")
    ax.set_ylabel("win ratio (wins + draws/2)")
    ax.set_title(f"{record['game']} {record['game_options']}: {record['simulations']} sims, "
                 f"{record['games']} games per point", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ---- main ----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "curve":
            game = resolve_game(args) if args.game else None
            folder = out_folder(args)
            run_curve(args.run, args.games, args.seed, folder, args.sims, args.mcts_sims,
                      args.epsilon, game)
            return 0
        game = resolve_game(args)
        folder = out_folder(args)
        run = run_match if args.command == "match" else run_tournament
        run(game, args.agents, args.games, args.seed, folder)
    except (ValueError, FileNotFoundError) as e:  # CheckpointError is a ValueError
        print(f"evaluate.py: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a GTP engine that fails during a match
        if type(e).__name__ not in ("GTPError", "GTPTimeout"):
            raise
        print(f"evaluate.py: error: GTP engine: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
