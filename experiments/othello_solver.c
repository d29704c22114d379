/* An exact Othello solver for small boards (n x n, n even, 4 <= n <= 8), by win / draw / loss.

   Built and driven by experiments/solved_positions.py, which checks it against games/othello.py
   (tests/test_solved_positions.py): the same placing moves and flips, and the same end, as
   OpenSpiel's rules there: a side with no placing move passes, the game ends when neither side
   has one, and the side with more discs wins (empty squares count for nobody).

   Boards are bitboards in a uint64: bit r * n + c is square (r, c), as the game's actions number
   them. `P` holds the discs of the player to move, `O` the other player's.

   The search is negamax alpha-beta over the values -1 / 0 / +1 for the player to move (a loss, a
   draw, a win). Each move `solve` reports is searched with the window (-1, +1), which gives its
   value exactly; inside, a node that has found a draw asks its other moves only whether they win
   (a null window), about twice as fast at 18 - 22 empty squares on 6x6 as exact values at every
   node. The transposition table keeps bounds (the value lies in [lo, hi]) and the move that gave
   them, tried first when the position comes back; the other moves fastest first (the fewest
   replies for the opponent, a corner counting twice; a corner move, then a move into a quarter
   of the board with an odd number of empty squares, breaking ties). At 6 empty squares or fewer
   the search has no table and makes no move list: it tries each empty square (those in odd
   quarters first: the parity heuristic) by the discs it would turn, and values the last one
   without a move. Session 73's rewrite (the directions unrolled, the last empties, the table's
   move) valued the same positions alike 3 - 3.5x faster (docs/strength.md).

   Commands, one a line on standard input, numbers in decimal:
       solve N P O      ->  "A:V A:V ..."  every legal action A (N*N: the pass) and its value V
                                           for the player to move
       step N P O A     ->  "P' O'"        the boards after action A, the new mover's first
       moves N P O      ->  "M"            the bitboard of the placing moves of the player to move
   Counts of the nodes searched go to standard error at the end.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t u64;

static int N;          /* board side */
static u64 FULL;       /* every square */
static u64 NOT_FIRST;  /* every square but column 0 */
static u64 NOT_LAST;   /* every square but column N - 1 */
static long long nodes;

static void setup(int n) {
    N = n;
    FULL = (n * n == 64) ? ~0ULL : ((1ULL << (n * n)) - 1);
    u64 first = 0, last = 0;
    for (int r = 0; r < n; r++) {
        first |= 1ULL << (r * n);
        last |= 1ULL << (r * n + n - 1);
    }
    NOT_FIRST = FULL & ~first;
    NOT_LAST = FULL & ~last;
}

static u64 QUADRANT[4]; /* the board's four quarters, for the parity of the empty squares */
static u64 CORNERS;

static void setup_regions(void) {
    int h = N / 2;
    for (int q = 0; q < 4; q++) QUADRANT[q] = 0;
    for (int r = 0; r < N; r++)
        for (int c = 0; c < N; c++) QUADRANT[(r >= h) * 2 + (c >= h)] |= 1ULL << (r * N + c);
    CORNERS = 1ULL | (1ULL << (N - 1)) | (1ULL << (N * (N - 1))) | (1ULL << (N * N - 1));
}

/* x moved one square in each direction, nothing wrapping, nothing past the board. */
static inline u64 sh_e(u64 x) { return (x << 1) & NOT_FIRST; }
static inline u64 sh_w(u64 x) { return (x >> 1) & NOT_LAST; }
static inline u64 sh_s(u64 x) { return (x << N) & FULL; }
static inline u64 sh_n(u64 x) { return x >> N; }
static inline u64 sh_se(u64 x) { return (x << (N + 1)) & NOT_FIRST & FULL; }
static inline u64 sh_sw(u64 x) { return (x << (N - 1)) & NOT_LAST & FULL; }
static inline u64 sh_ne(u64 x) { return (x >> (N - 1)) & NOT_FIRST; }
static inline u64 sh_nw(u64 x) { return (x >> (N + 1)) & NOT_LAST; }

/* the squares where P can place: a run of O's discs next to one of P's, each direction */
#define MOVES_DIR(SH)                                          \
    {                                                          \
        u64 x = SH(P) & O;                                     \
        for (int i = 0; i < N - 3; i++) x |= SH(x) & O;        \
        moves |= SH(x) & empty;                                \
    }
static u64 moves_of(u64 P, u64 O) {
    u64 empty = FULL & ~(P | O), moves = 0;
    MOVES_DIR(sh_e) MOVES_DIR(sh_w) MOVES_DIR(sh_s) MOVES_DIR(sh_n)
    MOVES_DIR(sh_se) MOVES_DIR(sh_sw) MOVES_DIR(sh_ne) MOVES_DIR(sh_nw)
    return moves;
}

/* the discs P's disc on m turns over (none: m is not a placing move) */
#define FLIPS_DIR(SH)                                          \
    {                                                          \
        u64 run = 0, t = SH(m);                                \
        while (t & O) {                                        \
            run |= t;                                          \
            t = SH(t);                                         \
        }                                                      \
        if (t & P) flips |= run;                               \
    }
static u64 flips_of(u64 P, u64 O, u64 m) {
    u64 flips = 0;
    FLIPS_DIR(sh_e) FLIPS_DIR(sh_w) FLIPS_DIR(sh_s) FLIPS_DIR(sh_n)
    FLIPS_DIR(sh_se) FLIPS_DIR(sh_sw) FLIPS_DIR(sh_ne) FLIPS_DIR(sh_nw)
    return flips;
}

static inline int popcount(u64 x) { return __builtin_popcountll(x); }

/* the end's value for P: more discs wins (empty squares count for nobody) */
static inline int final_value(u64 P, u64 O) {
    int d = popcount(P) - popcount(O);
    return (d > 0) - (d < 0);
}

/* the empty squares in quarters with an odd number of them: tried first near the end (the
   parity heuristic: the last move in a region is worth having) */
static inline u64 odd_regions(u64 empty) {
    u64 odd = 0;
    for (int q = 0; q < 4; q++)
        if (popcount(empty & QUADRANT[q]) & 1) odd |= QUADRANT[q];
    return odd;
}

/* ---- transposition table: bounds on the value and the best move; buckets of two, the one
   nearer the root kept ---- */
#define TT_BITS 21
#define TT_MIN_EMPTIES 7 /* positions with fewer empties are not stored: cheaper to search */
#ifndef LAST_EMPTIES       /* (-DLAST_EMPTIES=64: a plain alpha-beta without the table, for tests) */
#define LAST_EMPTIES 6   /* at this many empties or fewer: no move generation, no table */
#endif
typedef struct {
    u64 p, o;
    int8_t lo, hi;  /* the value lies in [lo, hi], each -1, 0 or 1 (lo == hi: exact) */
    int8_t empties; /* 0: an empty slot */
    int8_t move;    /* the move that gave the value or the cutoff; -1: none */
} Entry;
static Entry *table; /* 2 << TT_BITS entries: bucket i holds 2i and 2i + 1 */

static inline Entry *bucket(u64 p, u64 o) {
    u64 h = p * 0x9E3779B97F4A7C15ULL ^ (o + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 29;
    return &table[2 * (h & ((1ULL << TT_BITS) - 1))];
}

static Entry *lookup(u64 p, u64 o) {
    Entry *b = bucket(p, o);
    for (int i = 0; i < 2; i++)
        if (b[i].empties && b[i].p == p && b[i].o == o) return &b[i];
    return NULL;
}

static void store(u64 p, u64 o, int empties, int lo, int hi, int move) {
    Entry *b = bucket(p, o), *slot;
    if (b[0].empties && b[0].p == p && b[0].o == o) slot = &b[0];
    else if (b[1].empties && b[1].p == p && b[1].o == o) slot = &b[1];
    else slot = (b[0].empties <= b[1].empties) ? &b[0] : &b[1]; /* the one farther from the root */
    if (slot->empties && slot->p == p && slot->o == o) { /* the same position: narrow its bounds */
        if (lo < slot->lo) lo = slot->lo;
        if (hi > slot->hi) hi = slot->hi;
        if (move < 0) move = slot->move;
    }
    slot->p = p;
    slot->o = o;
    slot->lo = (int8_t)lo;
    slot->hi = (int8_t)hi;
    slot->empties = (int8_t)empties;
    slot->move = (int8_t)move;
}

static void clear_table(void) { memset(table, 0, sizeof(Entry) * (2ULL << TT_BITS)); }

static int search(u64 P, u64 O, int alpha, int beta);

/* The last few empty squares (`empty`, at most LAST_EMPTIES): each empty square is tried as a
   move by the discs it would turn (none: not a move), those in odd regions first; no table.
   `passed`: the opponent has just passed, so no move here ends the game. */
static int search_last(u64 P, u64 O, u64 empty, int alpha, int beta, int passed) {
    nodes++;
    int best = -2; /* no move yet */
    u64 odd = odd_regions(empty);
    u64 groups[2] = {empty & odd, empty & ~odd};
    for (int g = 0; g < 2; g++) {
        u64 rest = groups[g];
        while (rest) {
            u64 m = rest & (0 - rest);
            rest &= rest - 1;
            u64 f = flips_of(P, O, m);
            if (!f) continue;
            u64 P2 = O & ~f, O2 = P | m | f, e2 = empty & ~m;
            int v = e2 ? -search_last(P2, O2, e2, -beta, -alpha, 0) : final_value(O2, P2);
            if (v > best) {
                best = v;
                if (best > alpha) alpha = best;
                if (alpha >= beta) return best;
            }
        }
    }
    if (best == -2) { /* no placing move: pass, or the end after the opponent's pass */
        if (passed) return final_value(P, O);
        return -search_last(O, P, empty, -beta, -alpha, 1);
    }
    return best;
}

/* The value of a position whose mover has no placing move: the end, or the opponent's turn. */
static int value_after_pass_or_end(u64 P, u64 O, int alpha, int beta) {
    if (moves_of(O, P) == 0) return final_value(P, O);
    return -search(O, P, -beta, -alpha);
}

/* Negamax alpha-beta over the values -1 / 0 / +1 (fail-soft): the exact value where it lies
   strictly inside (alpha, beta); else a bound on the right side of the window (at most alpha, or
   at least beta). (-1, +1) gives every value exactly; inside it, a node that has found a draw asks
   its other moves only whether they win, a null window. */
static int search(u64 P, u64 O, int alpha, int beta) {
    u64 empty = FULL & ~(P | O);
    int empties = popcount(empty);
    if (empties <= LAST_EMPTIES) return search_last(P, O, empty, alpha, beta, 0);
    nodes++;
    u64 moves = moves_of(P, O);
    if (!moves) return value_after_pass_or_end(P, O, alpha, beta);
    int lo = -1, hi = 1, hint = -1;
    if (empties >= TT_MIN_EMPTIES) {
        Entry *e = lookup(P, O);
        if (e) {
            lo = e->lo;
            hi = e->hi;
            hint = e->move;
            if (lo >= beta || lo == hi) return lo;
            if (hi <= alpha) return hi;
            if (lo > alpha) alpha = lo;
            if (hi < beta) beta = hi;
        }
    }
    const int alpha0 = alpha;

    /* the table's move first, then the rest by the opponent's replies, fewest first (corners
       count twice; a move into an odd region breaks ties); a child whose known bound already
       reaches beta ends the search at once (an enhanced transposition cutoff) */
    int order[64], keys[64], count = 0;
    u64 odd = odd_regions(empty), rest = moves;
    while (rest) {
        int sq = __builtin_ctzll(rest);
        rest &= rest - 1;
        u64 m = 1ULL << sq, f = flips_of(P, O, m);
        u64 P2 = O & ~f, O2 = P | m | f;
        if (empties - 1 >= TT_MIN_EMPTIES) {
            Entry *c = lookup(P2, O2);
            if (c && -c->hi >= beta) {
                store(P, O, empties, -c->hi, hi, sq);
                return -c->hi;
            }
        }
        u64 replies = moves_of(P2, O2);
        int key = sq == hint ? -1000 : 4 * (popcount(replies) + popcount(replies & CORNERS))
                                          - 2 * !!(m & CORNERS) - !!(m & odd);
        int i = count++;
        while (i > 0 && keys[i - 1] > key) {
            keys[i] = keys[i - 1];
            order[i] = order[i - 1];
            i--;
        }
        keys[i] = key;
        order[i] = sq;
    }
    int best = -1, best_move = order[0];
    for (int i = 0; i < count; i++) {
        u64 m = 1ULL << order[i], f = flips_of(P, O, m);
        int v = -search(O & ~f, P | m | f, -beta, -alpha);
        if (v > best) {
            best = v;
            best_move = order[i];
            if (best > alpha) alpha = best;
            if (alpha >= beta) break;
        }
    }
    if (empties >= TT_MIN_EMPTIES) {
        if (best <= alpha0) store(P, O, empties, lo, best, -1);          /* failed low: upper */
        else if (best >= beta) store(P, O, empties, best, hi, best_move); /* failed high: lower */
        else store(P, O, empties, best, best, best_move);                 /* exact */
    }
    return best;
}

static int solve(u64 P, u64 O) { return search(P, O, -1, 1); }

int main(void) {
    table = malloc(sizeof(Entry) * (2ULL << TT_BITS));
    if (!table) return 1;
    clear_table();
    char command[16];
    int n;
    unsigned long long p, o;
    int current = 0;
    while (scanf("%15s %d %llu %llu", command, &n, &p, &o) == 4) {
        if (n < 4 || n > 8 || n % 2) {
            printf("error: size %d\n", n);
            fflush(stdout);
            continue;
        }
        if (n != current) { /* another board: the table's squares mean something else */
            setup(n);
            setup_regions();
            clear_table();
            current = n;
        }
        u64 P = p, O = o;
        if (!strcmp(command, "moves")) {
            printf("%llu\n", (unsigned long long)moves_of(P, O));
        } else if (!strcmp(command, "step")) {
            int a;
            if (scanf("%d", &a) != 1) return 1;
            if (a == N * N) {
                printf("%llu %llu\n", (unsigned long long)O, (unsigned long long)P);
            } else {
                u64 m = 1ULL << a, f = flips_of(P, O, m);
                printf("%llu %llu\n", (unsigned long long)(O & ~f), (unsigned long long)(P | m | f));
            }
        } else if (!strcmp(command, "solve")) {
            u64 moves = moves_of(P, O);
            if (!moves) {
                if (moves_of(O, P)) printf("%d:%d", N * N, -solve(O, P));
            }
            int first = 1;
            while (moves) {
                int sq = __builtin_ctzll(moves);
                moves &= moves - 1;
                u64 m = 1ULL << sq, f = flips_of(P, O, m);
                printf(first ? "%d:%d" : " %d:%d", sq, -solve(O & ~f, P | m | f));
                first = 0;
            }
            printf("\n");
        } else {
            printf("error: command %s\n", command);
        }
        fflush(stdout);
    }
    fprintf(stderr, "nodes %lld\n", nodes);
    return 0;
}
