/* The smallest guest: one line on stdout, exit status 0. */
#include <stdio.h>

int main(void)
{
	printf("hello from a nomu guest\n");
	return 0;
}
