"""Records of evaluation results: JSON-ready dicts, their text tables and their plots.

- `result_record` / `outcome_record`: a match's W/D/L with 95% intervals, overall and by who moved
  first, each agent's simulations, rollouts and seconds per move, and its games' moves;
- `format_match`, `format_per_move`, `format_tournament`: the tables evaluate.py prints;
- `plot_heatmap` (a tournament's win ratios, seed 000 Figure 5.3) and `plot_curve` (a run's
  learning curve, Figures 5.1 and 5.2);
- `write_json`, `check_games`: the output files and the one check every command makes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import re

import numpy as np

from azjax.eval.game_records import move_names, winner
from azjax.eval.stats import proportion_ci, score_ci


def result_record(result) -> dict:
    """W/D/L counts and 95% intervals of a MatchResult, overall and by who moved first."""

    def part(wins, draws, losses):
        n = wins + draws + losses
        return dict(
            games=n,
            wins=wins,
            draws=draws,
            losses=losses,
            win=list(proportion_ci(wins, n)),
            draw=list(proportion_ci(draws, n)),
            loss=list(proportion_ci(losses, n)),
            score=list(score_ci(wins, draws, losses)),
        )

    return dict(
        overall=part(result.wins, result.draws, result.losses),
        first=part(*result.first),
        second=part(*result.second),
    )


def outcome_record(names, outcome, game=None) -> dict:
    """A match's record; with `game`, also its games' moves and results (`game_records`)."""
    record = dict(
        agents=list(names),
        result=result_record(outcome.result),
        per_move={n: dataclasses.asdict(s) for n, s in zip("AB", outcome.stats)},
        wall_seconds=round(outcome.wall_seconds, 2),
        devices=outcome.devices,
    )
    if game is not None:
        record["game_records"] = games_record(game, outcome)
    return record


def checkpoints_record(specs, agents) -> dict[str, str]:
    """{spec: "RUN@STEP"} of the ckpt agents: the network each played, its step resolved (a spec
    without a step, or with @best, names another network once the run trains on)."""
    return {s: a.checkpoint for s, a in zip(specs, agents) if a.checkpoint is not None}


def games_record(game, outcome) -> list[dict]:
    """Each game of a `MatchOutcome` as {moves: the move names from the initial position
    ("resign" last where a side resigned), result: "black" | "white" | "draw", a_played:
    "black" | "white"}."""
    return [game_record(game, *g) for g in zip(outcome.moves, outcome.returns, outcome.a_first)]


def game_record(game, moves: list[int], return_a: float, a_first: bool) -> dict:
    """One game of `games_record`: its actions `moves`, A's return and whether A moved first."""
    return dict(
        moves=move_names(game, moves),
        result=winner(float(return_a), bool(a_first)),
        a_played="black" if a_first else "white",
    )


def format_match(record: dict) -> str:
    a, b = record["agents"]
    lines = [
        f"A = {a}\nB = {b}",
        f"{'A moved':<10}{'games':>6}  {'win':<13}{'draw':<13}{'loss':<13}score",
    ]
    for part in ("first", "second", "overall"):
        r = record["result"][part]
        cells = "".join(f"{r[k][0]:.2f} ± {r[k][1]:.2f}  " for k in ("win", "draw", "loss"))
        lines.append(f"{part:<10}{r['games']:>6}  {cells}{r['score'][0]:.3f} ± {r['score'][1]:.3f}")
    lines.append(format_per_move(record["per_move"], {"A": a, "B": b}))
    if record.get("devices", 1) > 1:
        lines.append(f"games split over {record['devices']} devices (--cpu_devices)")
    if record.get("openings", "none") != "none":
        n = len(record["by_opening"])
        lines.append(
            f"openings: {record['openings']}, {n} of them, each played with both colours "
            "(A moved first = A played black)"
        )
    perfect = record.get("vs_perfect_play")
    if perfect is not None:
        lines.append(
            f"won sides: A won {perfect['won_sides']} of the "
            f"{perfect['decisive_openings']} openings' won sides (a perfect player "
            "wins all)"
            + (
                f"; lost {perfect['losses_in_drawn_openings']} games of "
                f"{perfect['drawn_openings']} drawn openings"
                if perfect["drawn_openings"]
                else ""
            )
        )
    return "\n".join(lines)


def format_per_move(per_move: dict, names: dict) -> str:
    """Simulations, rollouts and seconds per move (seed 000 Table 5.6); '-' where not known."""

    def cell(v, fmt):
        return "-" if v is None else format(v, fmt)

    lines = [f"{'per move':<10}{'sims':>8}{'rollouts':>10}{'s/move':>10}{'budget s':>10}"]
    for key, s in per_move.items():
        lines.append(
            f"{key:<10}{cell(s['simulations'], 'd'):>8}{cell(s['rollouts'], '.1f'):>10}"
            f"{cell(s['seconds'], '.4f'):>10}{cell(s['budget'], '.4f'):>10}  {names[key]}"
        )
    return "\n".join(lines)


def format_tournament(record: dict) -> str:
    names = record["agents"]
    lines = ["win ratio (row against column, wins + draws/2):"]
    lines.append(" " * 4 + "".join(f"{j:>7}" for j in range(len(names))))
    for i, row in enumerate(record["win_ratio"]):
        lines.append(
            f"{i:>3} "
            + "".join(f"{'-' if v is None else f'{v:.2f}':>7}" for v in row)
            + f"  {names[i]}"
        )
    lines.append("Elo (maximum likelihood, mean 0, ± 95%):")
    if record["elo_prior_draws"]:
        lines.append("  (some agent won or lost every game: one virtual draw added to every pair)")
    for name, e in sorted(record["elo"].items(), key=lambda kv: -kv[1]["elo"]):
        lines.append(f"  {e['elo']:8.1f} ± {e['ci95']:6.1f}  {name}")
    return "\n".join(lines)


def game_title(record: dict) -> str:
    """`hex size=6, swap=False`, or the bare name for a game without options."""
    options = ", ".join(f"{k}={v}" for k, v in (record.get("game_options") or {}).items())
    return f"{record['game']} {options}" if options else record["game"]


def write_json(folder: str, name: str, data: dict) -> str:
    """folder/name, written whole (a temporary file renamed over it): a reader, or a process
    stopped while writing, never sees half a file. Indented, but a list of numbers or strings
    (a game's moves, a row of a matrix) takes one line."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path + ".tmp", "w") as f:
        f.write(_one_line_lists(json.dumps(data, indent=2)))
    os.replace(path + ".tmp", path)
    return path


def remove_earlier(folder: str, *patterns: str) -> None:
    """Removes the files an earlier command left in `folder` (an --out given again) whose names
    match `patterns` (glob patterns; plain names), once this command's arguments are checked: a
    stop before it writes its own must not leave the earlier results looking like this
    command's."""
    for pattern in patterns:
        for path in glob.glob(os.path.join(glob.escape(folder), pattern)):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
                os.remove(path)


def _one_line_lists(text: str) -> str:
    """Indented JSON with every list of scalars on one line (strings hold no raw newlines, so
    only the layout changes)."""

    def join(m: re.Match) -> str:
        return re.sub(r"\n\s*", "", re.sub(r",\n\s*", ", ", m.group()))

    return re.sub(r"\[[^\[\]{}]*\]", join, text)


def check_games(n: int) -> None:
    if n < 1:
        raise ValueError(f"--games must be at least 1, got {n}")


def pyplot(path: str):
    """matplotlib's pyplot with the Agg backend; makes the folder of `path`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_heatmap(record: dict, path: str, title: str | None = None) -> None:
    """The win-ratio matrix as seed 000 Figure 5.3: the row agent's ratio against the column's."""
    plt = pyplot(path)
    names = [n if len(n) <= 28 else n[:27] + "…" for n in record["agents"]]
    ratio = np.array([[np.nan if v is None else v for v in row] for row in record["win_ratio"]])
    size = 2.5 + 0.7 * len(names)
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    image = ax.imshow(ratio, vmin=0.0, vmax=1.0, cmap="viridis")
    for i in range(len(names)):
        for j in range(len(names)):
            if not np.isnan(ratio[i, j]):
                ax.text(
                    j,
                    i,
                    f"{ratio[i, j]:.2f}",
                    ha="center",
                    va="center",
                    color="white" if ratio[i, j] < 0.5 else "black",
                    fontsize=9,
                )
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_xlabel("opponent")
    ax.set_ylabel("agent")
    fig.colorbar(image, ax=ax, label="(wins + draws/2) / games")
    ax.set_title(
        title or f"{record['game']}: {record['games_per_pair']} games per pair", fontsize=10
    )
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)


def plot_elo(record: dict, path: str) -> None:
    """The ladder Elo with its 95% interval, over training time and over self-play positions:
    the loop's placements (`record["elo"]`, from metrics.jsonl) and the curve's own of every
    checkpoint (`record["placed"]`, `evaluate.py curve --measures=ladder`) where it has them; a
    placement that had not settled (its `moving`) is drawn as an open marker."""
    plt = pyplot(path)
    series = [
        (rows, colour, label)
        for rows, colour, label in (
            (record.get("elo") or [], "tab:green", "in the loop"),
            (record.get("placed") or [], "tab:orange", "each checkpoint (curve)"),
        )
        if rows
    ]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for ax, key, label in (
        (axes[0], "hours", "training time (hours: self-play, learning, evaluation)"),
        (axes[1], "positions", "self-play positions"),
    ):
        for rows, colour, name in series:
            x = np.array([r[key] for r in rows])
            elo = np.array([r["elo"] for r in rows])
            half = np.array([r["ci95"] for r in rows])
            moving = np.array([r.get("moving", 0) != 0 for r in rows])
            ax.plot(x, elo, "o-", color=colour, ms=3, label=name if len(series) > 1 else None)
            if moving.any():
                ax.plot(x[moving], elo[moving], "o", color="white", mec=colour, ms=5)
            ax.fill_between(x, elo - half, elo + half, color=colour, alpha=0.15)
        if any(r.get("moving", 0) for rows, _, _ in series for r in rows):
            ax.plot([], [], "o", color="white", mec="grey", label="not settled: still moving")
        if ax.get_legend_handles_labels()[0]:  # two series, or a placement not settled
            ax.legend(fontsize=7, loc="lower right")
        ax.axhline(0.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel(label, fontsize=8)
    axes[0].set_ylabel("Elo (ladder: pure MCTS-16 = 0)")
    fig.suptitle(f"{game_title(record)}: Elo on the ladder", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_errors(record: dict, path: str) -> None:
    """The exact error rate of each checkpoint (`record["curve"]` rows' `errors`) with its 95%
    interval, over self-play games (or iterations)."""
    plt = pyplot(path)
    rows = [r for r in record["curve"] if "errors" in r]
    use_games = all(r["training_games"] is not None for r in rows)
    x = np.array([r["training_games"] if use_games else r["step"] for r in rows])
    rate = np.array([r["errors"]["rate"] for r in rows])
    half = np.array([r["errors"]["ci95"] for r in rows])
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    ax.plot(x, rate, "o-", color="tab:purple", ms=3)
    ax.fill_between(x, np.clip(rate - half, 0, 1), rate + half, color="tab:purple", alpha=0.15)
    ax.set_ylim(0, None)
    ax.set_xlabel("self-play games" if use_games else "iteration")
    ax.set_ylabel("exact error rate")
    ax.set_title(
        f"{game_title(record)}: {record['simulations']} sims, moves that throw a win or draw away "
        f"in {record.get('error_positions', '?')} solved positions",
        fontsize=8,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_curve(record: dict, path: str) -> None:
    """Score per checkpoint, like seed 000 Figures 5.1/5.2: vs pure MCTS blue, vs previous red."""
    plt = pyplot(path)
    rows = record["curve"]
    use_games = all(r["training_games"] is not None for r in rows)
    x = [r["training_games"] if use_games else r["step"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for name, colour, label in (
        ("vs_mcts", "tab:blue", f"vs pure MCTS ({record['mcts_simulations']} sims)"),
        ("vs_previous", "tab:red", f"vs previous checkpoint (ε = {record['epsilon']})"),
    ):
        score = np.array([r[name]["overall"]["score"][0] for r in rows])
        half = np.array([r[name]["overall"]["score"][1] for r in rows])
        ax.plot(x, score, "o-", color=colour, ms=3, label=label)
        ax.fill_between(
            x, np.clip(score - half, 0, 1), np.clip(score + half, 0, 1), color=colour, alpha=0.15
        )
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_ylim(0, 1)
    ax.set_xlabel("self-play games" if use_games else "iteration")
    ax.set_ylabel("win ratio (wins + draws/2)")
    ax.set_title(
        f"{game_title(record)}: {record['simulations']} sims, {record['games']} games per point",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
