/* Prints its arguments, one per line, prefixed by the index.  Used directly
 * and as the interpreter of a "#!" script, where the kernel builds
 *   argv = [interpreter path, optional #! argument, script path, script args...]
 * An argument that is an absolute path is printed as its basename, so the
 * output does not depend on where the build tree or the script lives. */
#include <stdio.h>
#include <string.h>

static const char *shown(const char *s)
{
	if (s[0] != '/')
		return s;
	const char *slash = strrchr(s, '/');
	return slash[1] ? slash + 1 : s;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

int main(int argc, char **argv)
{
	printf("argc=%d\n", argc);
	printf("argv[0] ends with echoargs: %s\n",
	       argc > 0 && argv[0] && ends_with(argv[0], "echoargs") ? "yes" : "no");
	for (int i = 1; i < argc; i++)
		printf("argv[%d]=%s\n", i, shown(argv[i]));
	return 0;
}
