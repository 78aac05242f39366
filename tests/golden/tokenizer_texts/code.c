#include <stdio.h>
#include <stdlib.h>

/* Counts the lines of a file; a trailing line without '\n' counts too. */
static long count_lines(FILE *f) {
	long lines = 0;
	int c, last = '\n';
	while ((c = fgetc(f)) != EOF) {
		if (c == '\n') ++lines;
		last = c;
	}
	return lines + (last != '\n');
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s FILE\n", argv[0]); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    printf("%ld\n", count_lines(f));   // 0x1F, 1e-3, i++ && j-- || k->v
    return fclose(f) == 0 ? 0 : 1;
}
