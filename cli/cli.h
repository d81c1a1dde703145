/*
 * cli.h - the subcommands of `cairn`. Each takes argc/argv with argv[0] the
 * subcommand name and returns the process exit status: 0 success, 1
 * failure (message already printed to stderr), 2 usage error (usage
 * printed to stderr).
 */
#ifndef CAIRN_CLI_H
#define CAIRN_CLI_H

int cmd_serve(int argc, char **argv);
int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);
int cmd_fsck(int argc, char **argv);
int cmd_status(int argc, char **argv);

#endif
