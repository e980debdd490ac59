/* Replays a fuzz target's seed corpus without libFuzzer, so `make check`
 * runs every fuzz target over its corpus (and any crash it once found).
 * The corpus is $LS_FUZZ_CORPUS/<program name>/; extra file arguments are
 * replayed too. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		fprintf(stderr, "cannot open %s\n", path);
		return -1;
	}
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			uint8_t *nb = realloc(buf, cap);
			if (nb == NULL) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = nb;
		}
		size_t r = fread(buf + len, 1, cap - len, f);
		if (r == 0) {
			break;
		}
		len += r;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

int main(int argc, char *argv[])
{
	const char *name = strrchr(argv[0], '/');
	name = name ? name + 1 : argv[0];
	const char *root = getenv("LS_FUZZ_CORPUS");
	char dir[2048];
	int n = 0;
	if (root == NULL) {
		root = LS_ABS_SRCDIR "/tests/fuzz/corpus";
	}
	snprintf(dir, sizeof dir, "%s/%s", root, name);
	/* Run an empty input first: every decoder must survive it. */
	LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
	DIR *d = opendir(dir);
	if (d != NULL) {
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			char path[4096];
			if (e->d_name[0] == '.') {
				continue;
			}
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			if (run_file(path) != 0) {
				closedir(d);
				return 1;
			}
			n++;
		}
		closedir(d);
	}
	for (int i = 1; i < argc; i++) {
		if (run_file(argv[i]) != 0) {
			return 1;
		}
		n++;
	}
	printf("%s: replayed %d corpus inputs\n", name, n);
	return 0;
}
