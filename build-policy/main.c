#include <string.h>
int kvt_cmd_policy(int argc, char **argv);
int kvt_cmd_replay(int argc, char **argv);
int main(int argc, char **argv) {
	if (argc > 1 && !strcmp(argv[1], "policy")) return kvt_cmd_policy(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "replay")) return kvt_cmd_replay(argc - 1, argv + 1);
	return 2;
}
