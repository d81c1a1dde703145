/*
 * proto.c - opcode names. See proto.h.
 */
#include "proto.h"

static const char *const op_names[OP__COUNT] = {
	[OP_HELLO] = "hello",
	[OP_PING] = "ping",
	[OP_GETATTR] = "getattr",
	[OP_LOOKUP] = "lookup",
	[OP_SETATTR] = "setattr",
	[OP_CREATE] = "create",
	[OP_SYMLINK] = "symlink",
	[OP_READLINK] = "readlink",
	[OP_LINK] = "link",
	[OP_REMOVE] = "remove",
	[OP_RENAME] = "rename",
	[OP_READDIR] = "readdir",
	[OP_READ] = "read",
	[OP_WRITE] = "write",
	[OP_FSYNC] = "fsync",
	[OP_STATFS] = "statfs",
	[OP_SETXATTR] = "setxattr",
	[OP_GETXATTR] = "getxattr",
	[OP_LISTXATTR] = "listxattr",
	[OP_REMOVEXATTR] = "removexattr",
	[OP_FALLOCATE] = "fallocate",
	[OP_STATUS] = "status",
};

const char *proto_op_name(unsigned op)
{
	if (op == OP_CB_BREAK)
		return "cb_break";
	if (op < OP__COUNT && op_names[op])
		return op_names[op];
	return "unknown";
}
