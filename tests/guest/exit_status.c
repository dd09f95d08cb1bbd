/* Exits with the status given as argv[1] (atoi), printing nothing.
 * exit() truncates to 8 bits, as the kernel does: "256" exits 0. */
#include <stdlib.h>

int main(int argc, char **argv)
{
	exit(argc > 1 ? atoi(argv[1]) : 0);
}
