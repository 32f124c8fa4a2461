/* trapline guest smoke test: proves the initramfs runs a static binary and passes
 * arguments. Prints the machine name and its arguments. */
#include <stdio.h>
#include <sys/utsname.h>

int main(int argc, char **argv)
{
	struct utsname u;

	uname(&u);
	printf("hello from %s (%s %s)", u.machine, u.sysname, u.release);
	for (int i = 1; i < argc; i++)
		printf(" arg%d=%s", i, argv[i]);
	printf("\n");
	return 0;
}
