/* Closes its standard descriptors: that must not close nomu's own, so
 * nomu's --trace output keeps coming. */
#include <errno.h>
#include <unistd.h>

int main(void)
{
	close(0);
	close(1);
	close(2);
	if (write(2, "x", 1) != -1 || errno != EBADF)
		return 1;
	return 7;
}
