/* An exact Connect Four solver (four in a row, up to 7 rows x 7 columns), by win / draw / loss.

   Built and driven by experiments/solved_positions.py, which checks it against
   games/connect_four.py (tests/test_solved.py): the same open columns, the same discs after each
   move, the same end (a line of four wins; a full board without one is a draw).

   Boards are bitboards in a uint64, ROWS + 1 bits a column: bit c * (ROWS + 1) + h is height h
   (from the bottom) of column c, the extra bit of each column always empty. `P` holds the discs
   of the player to move, `O` the other player's.

   The search is negamax over the values -1 / 0 / +1 for the player to move (a loss, a draw, a
   win): a node stops at its first winning move (alpha-beta with the window (-1, +1)), so every
   value is exact and a transposition table keeps it whatever the window above it. A move that
   completes a line wins at once; where the opponent threatens to complete one, only the
   blocking moves are tried (two threats: lost); the others go centre first.

   Commands, one a line on standard input, numbers in decimal:
       solve ROWS COLS P O    ->  "A:V A:V ..."  every open column A and its value V for the mover
       step ROWS COLS P O A   ->  "P' O'"        the boards after a disc in column A, the new
                                                 mover's first
       moves ROWS COLS P O    ->  "M"            the open columns as a bitmask (bit c: column c)
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t u64;

static int ROWS, COLS, H; /* H = ROWS + 1 bits a column */
static u64 BOTTOM;        /* the lowest cell of every column */
static u64 TOP;           /* the highest playable cell of every column */
static u64 BOARD;         /* every playable cell */
static long long nodes;

static void setup(int rows, int cols) {
    ROWS = rows;
    COLS = cols;
    H = rows + 1;
    BOTTOM = TOP = BOARD = 0;
    for (int c = 0; c < cols; c++) {
        BOTTOM |= 1ULL << (c * H);
        TOP |= 1ULL << (c * H + rows - 1);
        BOARD |= ((1ULL << rows) - 1) << (c * H);
    }
}

static inline int popcount(u64 x) { return __builtin_popcountll(x); }

/* the cells where discs `x` have four in a row */
static inline int has_four(u64 x) {
    const int shifts[4] = {1, H, H - 1, H + 1}; /* up, across, down-right, up-right */
    for (int i = 0; i < 4; i++) {
        int s = shifts[i];
        u64 y = x & (x >> s);
        if (y & (y >> (2 * s))) return 1;
    }
    return 0;
}

/* the empty cells that would give discs `x` four in a row (whether playable now or not) */
static u64 winning_cells(u64 x, u64 empty) {
    u64 w = 0;
    const int shifts[4] = {1, H, H - 1, H + 1};
    for (int i = 0; i < 4; i++) {
        int s = shifts[i];
        if (s == 1) { /* vertical: three below */
            w |= (x << 1) & (x << 2) & (x << 3);
            continue;
        }
        u64 a = (x << s) & (x << (2 * s)); /* the two behind */
        w |= a & (x << (3 * s));           /* xxx. */
        w |= a & (x >> s);                 /* xx.x */
        u64 b = (x >> s) & (x >> (2 * s)); /* the two ahead */
        w |= b & (x >> (3 * s));           /* .xxx */
        w |= b & (x << s);                 /* x.xx */
    }
    return w & empty & BOARD;
}

static inline u64 playable(u64 mask) { return (mask + BOTTOM) & BOARD; }

/* ---- transposition table: exact values, always replaced ---- */
#define TT_BITS 22
typedef struct {
    u64 p, mask;
    int8_t value; /* -1, 0, 1; 2: empty */
} Entry;
static Entry *table;

static Entry *slot(u64 p, u64 mask) {
    u64 h = (p * 0x9E3779B97F4A7C15ULL) ^ ((mask + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL);
    return &table[(h ^ (h >> 31)) & ((1ULL << TT_BITS) - 1)];
}

static void clear_table(void) {
    for (u64 i = 0; i < (1ULL << TT_BITS); i++) table[i].value = 2;
}

static int order[16]; /* columns, centre first */

/* the value of the position for the player to move, who has no four yet and no immediate win
   checked */
static int solve(u64 P, u64 O) {
    nodes++;
    u64 mask = P | O;
    u64 moves = playable(mask);
    if (!moves) return 0; /* full board */
    u64 empty = BOARD & ~mask;
    if (winning_cells(P, empty) & moves) return 1; /* a line at once */
    Entry *e = slot(P, mask);
    if (e->value != 2 && e->p == P && e->mask == mask) return e->value;
    u64 threats = winning_cells(O, empty) & moves;
    if (threats) {
        if (threats & (threats - 1)) return -1; /* two to block */
        moves = threats;                        /* block the one */
    }
    u64 opp_wins = winning_cells(O, empty);
    int best = -1;
    for (int i = 0; i < COLS && best < 1; i++) {
        u64 m = moves & (((1ULL << H) - 1) << (order[i] * H));
        if (!m) continue;
        if (opp_wins & (m << 1)) continue; /* the opponent completes a line on top: -1 */
        int v = -solve(O, P | m);
        if (v > best) best = v;
    }
    e->p = P;
    e->mask = mask;
    e->value = (int8_t)best;
    return best;
}

/* the value for the player who just moved into `m`, the opponent (O) to move next */
static int value_of_move(u64 P, u64 O, u64 m) {
    u64 mine = P | m;
    if (has_four(mine)) return 1;
    if (!playable(mine | O)) return 0;
    return -solve(O, mine);
}

int main(void) {
    table = malloc(sizeof(Entry) << TT_BITS);
    if (!table) return 1;
    char command[16];
    int rows, cols, current_rows = 0, current_cols = 0;
    unsigned long long p, o;
    while (scanf("%15s %d %d %llu %llu", command, &rows, &cols, &p, &o) == 5) {
        if (rows < 4 || cols < 4 || rows > 7 || cols > 7 || (rows + 1) * cols > 64) {
            printf("error: board %dx%d\n", rows, cols);
            fflush(stdout);
            continue;
        }
        if (rows != current_rows || cols != current_cols) {
            setup(rows, cols);
            clear_table();
            for (int i = 0; i < cols; i++) /* centre first: c, c-1, c+1, c-2, ... */
                order[i] = cols / 2 + ((i % 2) ? -(i + 1) / 2 : i / 2);
            current_rows = rows;
            current_cols = cols;
        }
        u64 P = p, O = o, moves = playable(P | O);
        if (!strcmp(command, "moves")) {
            u64 open = 0;
            for (int c = 0; c < COLS; c++)
                if (moves & (((1ULL << H) - 1) << (c * H))) open |= 1ULL << c;
            printf("%llu\n", (unsigned long long)open);
        } else if (!strcmp(command, "step")) {
            int a;
            if (scanf("%d", &a) != 1) return 1;
            u64 m = moves & (((1ULL << H) - 1) << (a * H));
            printf("%llu %llu\n", (unsigned long long)O, (unsigned long long)(P | m));
        } else if (!strcmp(command, "solve")) {
            int first = 1;
            for (int c = 0; c < COLS; c++) {
                u64 m = moves & (((1ULL << H) - 1) << (c * H));
                if (!m) continue;
                printf(first ? "%d:%d" : " %d:%d", c, value_of_move(P, O, m));
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
