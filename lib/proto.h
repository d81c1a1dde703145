/*
 * proto.h - the Cairn wire protocol: constants, opcodes and value types.
 *
 * docs/PROTOCOL.md is the normative description of every message; this
 * header gives the names the code uses for it, and lib/msg.h the codec and
 * the facts about each opcode (name, flags). Everything on the wire is
 * little-endian. Error statuses are negative Linux errno values (the
 * protocol is Linux-only by design: client and server both run Linux).
 */
#ifndef CAIRN_PROTO_H
#define CAIRN_PROTO_H

#include <stdint.h>
#include <stddef.h>

#define CAIRN_MAGIC          0x4e524143u /* "CARN" read little-endian */
#define CAIRN_PROTO_VERSION  9u
#define CAIRN_DEFAULT_PORT   7070

/* Frame header: u32 len | u16 op | u16 flags | u32 id | i32 status. */
#define WIRE_HDR_SIZE        16u
/* Hard limit on a frame's payload; a peer announcing more is dropped. */
#define WIRE_MAX_PAYLOAD     ((4u << 20) + 4096u)
/* A sealed frame's tag, after its payload and counted in its len
 * (lib/seal.h): a header may announce WIRE_MAX_PAYLOAD + WIRE_TAG_SIZE. */
#define WIRE_TAG_SIZE        16u
/* Largest READ/WRITE data chunk. */
#define CAIRN_MAX_IO         (1u << 20)
#define CAIRN_NAME_MAX       255u
#define CAIRN_SYMLINK_MAX    4095u
/* At most this many links to an object (EMLINK beyond: ext4's limit). */
#define CAIRN_MAX_LINK       65000u
#define CAIRN_XATTR_NAME_MAX 255u
#define CAIRN_XATTR_SIZE_MAX 65536u
#define CAIRN_XATTR_LIST_MAX 65536u

/* Frame flags. */
enum {
	WF_REPLY = 1u << 0, /* a reply to request `id` */
	WF_PUSH  = 1u << 1, /* server-initiated message (callback break) */
	WF_CRED  = 1u << 2, /* request: the payload starts with the caller's
			     * credentials (docs/PROTOCOL.md "Credentials") */
};
/* Supplementary groups a credential block carries at most. */
#define CRED_MAX_GROUPS      32u

/*
 * Opcodes. Requests go client -> server and are answered by a frame with
 * the same op and id and WF_REPLY set. OP_CB_BREAK goes server -> client
 * with WF_PUSH and a non-zero id; a client that said HELLO_CB_ACK answers
 * it with an empty WF_REPLY frame of the same op and id once it has
 * invalidated what the push lists (docs/PROTOCOL.md, "Callbacks").
 */
enum cairn_op {
	OP_HELLO = 1,
	OP_PING,
	OP_GETATTR,
	OP_LOOKUP,
	OP_SETATTR,
	OP_CREATE,
	OP_SYMLINK,
	OP_READLINK,
	OP_LINK,
	OP_REMOVE,
	OP_RENAME,
	OP_READDIR,
	OP_READ,
	OP_WRITE,
	OP_FSYNC,
	OP_STATFS,
	OP_SETXATTR,
	OP_GETXATTR,
	OP_LISTXATTR,
	OP_REMOVEXATTR,
	OP_FALLOCATE,
	OP_STATUS,
	OP_BULKSTAT,
	OP_ORPHAN_DROP,
	OP_ATIME,
	OP_WTOKEN,
	OP_WRETURN,
	OP_LOCK,
	OP_GETLK,
	OP_AUTH,            /* first frame: the handshake (lib/seal.h) */
	OP_FIDS,
	OP_REMOVES,         /* several REMOVEs in one directory, one commit */
	OP_CREATES,         /* several CR_FID CREATEs likewise */
	OP_WRITEATTR,       /* a WRITE and the SETATTRs after it, one commit */
	OP_CREATEATTR,      /* CREATES, each with the SETATTRs after it */
	OP_LOCKD,           /* LOCK that may delegate the file's locks */
	OP_LKRETURN,        /* a delegation's locks handed back */
	OP_REMOVESAT,       /* REMOVES whose entries carry their times */
	OP__COUNT,          /* number of request opcodes + 1 */
	OP_CB_BREAK = 64,
	OP_CB_RECALL,
	OP_CB_LOCKWAKE,
	OP_CB_LKRECALL,
};

/*
 * How long a promise can be trusted without word from the server
 * (docs/PROTOCOL.md, "Promises and silence"). A server waits
 * CAIRN_CB_ACK_MS for a break's acknowledgement, then drops the client's
 * promises and closes its connection, and the change goes on. A client
 * cut off without a close (a partition, a hung host) cannot know that, so
 * it trusts its promises only until CAIRN_CB_LEASE_MS after it sent the
 * last request the server has answered, and asks something (a PING) once
 * CAIRN_CB_RENEW_MS have passed since then. The server's wait for a break
 * starts once the break is written: one written before the reply arrives
 * first, one written after was armed after the request was sent, so it
 * times out later than the client's lease ends; the difference is the
 * time a client has to drop what its kernel caches.
 */
#define CAIRN_CB_ACK_MS   3000
#define CAIRN_CB_LEASE_MS 2000
#define CAIRN_CB_RENEW_MS  600

/* HELLO flags. */
enum {
	/* The client acknowledges every CB_BREAK; the server then waits for
	 * the acknowledgement before answering the change that caused it. */
	HELLO_CB_ACK = 1u << 0,
	/* The client's request ids are unique across its reconnects and a
	 * resent request keeps its id; the server then answers a resent
	 * change from its duplicate request cache (server/drc.h). */
	HELLO_REPLAY = 1u << 1,
	/* With HELLO_CB_ACK: acknowledging a break never waits for a lock
	 * the client's own requests in progress hold, except the pages of
	 * an object its own WRITE in progress holds (docs/PROTOCOL.md,
	 * "Callbacks"); the server then waits for it where it could not. */
	HELLO_CB_NOLOCK = 1u << 2,
};

/* HELLO reply flags. */
enum {
	/* The client's key is a read-only export (cairn serve --ro-key):
	 * every change is answered -EROFS; mount read-only. */
	HELLO_REP_RO = 1u << 0,
	/* Root on the client acts as root here (cairn serve
	 * --no-root-squash); without it root is squashed to nobody. A
	 * client that makes objects itself needs to know whose they are. */
	HELLO_REP_ROOT = 1u << 1,
	/* The server takes SA_SYNC in SETATTR. */
	HELLO_REP_SA_SYNC = 1u << 2,
	/* The server takes SA_STEPS in SETATTR. */
	HELLO_REP_SA_STEPS = 1u << 3,
	/* The server takes CR_SYNC in CREATE, CREATES and CREATEATTR. */
	HELLO_REP_CR_SYNC = 1u << 4,
	/* The server takes first bytes of up to CAIRN_CREATES_BIG_MAX in
	 * each CREATES and CREATEATTR entry (not only
	 * CAIRN_CREATES_DATA_MAX), at most CAIRN_MAX_IO in all of one
	 * request's entries. */
	HELLO_REP_CREATES_BIG = 1u << 5,
};

/* SETATTR valid mask. */
enum {
	SA_MODE      = 1u << 0,
	SA_UID       = 1u << 1,
	SA_GID       = 1u << 2,
	SA_SIZE      = 1u << 3,
	SA_ATIME     = 1u << 4, /* set atime to the given value */
	SA_MTIME     = 1u << 5,
	SA_ATIME_NOW = 1u << 6, /* set atime to the server's clock */
	SA_MTIME_NOW = 1u << 7,
	SA_CTIME     = 1u << 8, /* set ctime to the given value */
	/* For a regular file: mtime and ctime change only as SA_MTIME and
	 * SA_CTIME say (the client's kernel keeps them: FUSE writeback
	 * cache); ignored for other types. */
	SA_KEEPTIME  = 1u << 9,
	SA_TOKEN     = 1u << 10, /* only while the requester holds the
				  * file's write token (WTOKEN) */
	/* Durable before the reply, with everything of the object before
	 * it, as after FSYNC (HELLO_REP_SA_SYNC says a server takes it). */
	SA_SYNC      = 1u << 11,
	/* The change stands for `size` consecutive changes of the client's
	 * journal (1 .. SA_STEPS_MAX), merged: the object's data version
	 * moves by that many instead of one. Never with SA_SIZE, whose
	 * field it takes (HELLO_REP_SA_STEPS says a server takes it). */
	SA_STEPS     = 1u << 12,
};
#define SA_STEPS_MAX 1024u

/* CREATE flags. CR_TOKEN: a regular file or directory the request
 * creates comes with its write token for the requester (WTOKEN), unless
 * the server's token table is full: the reply's `created` has
 * CREATED_TOKEN when it came (and without it, a file's first WR_TOKEN
 * write answers -ECANCELED).
 * CR_FID: the new object gets the request's fid, one that FIDS handed
 * out, and the request's time as its atime, mtime and ctime (and the
 * directory's mtime and ctime); a CR_FID CREATE whose object exists
 * already is answered as done and changes nothing (docs/PROTOCOL.md,
 * "Objects named ahead").
 * CR_SYNC: once made (or found made by an earlier copy), the object and
 * its directory entry, with its first bytes, are on stable storage when
 * the reply arrives, as after an FSYNC of it (a client's fsync of a file
 * it created, in one round trip); in CREATEATTR and CREATES an entry's.
 * Servers that take it say so in HELLO (HELLO_REP_CR_SYNC). */
enum { CR_EXCL = 1u << 0, CR_TOKEN = 1u << 1, CR_FID = 1u << 2,
       CR_SYNC = 1u << 3 };
/* CREATE reply's `created`: CREATED (the request made the object; 0: the
 * name existed), with CREATED_TOKEN when its token came (CR_TOKEN), and
 * (CREATEATTR) CREATED_ATTRS when the entry's attribute changes were
 * made with it (not when an earlier copy of the request made the file). */
enum { CREATED = 1u << 0, CREATED_TOKEN = 1u << 1, CREATED_ATTRS = 1u << 2 };
/* At most this many FIDs per FIDS request. */
#define CAIRN_FIDS_MAX 4096u
/* REMOVE flags. RM_KEEP: the requester may still have the file open; a
 * non-directory whose last link goes is kept as an orphan held by the
 * requester's client id until it sends ORPHAN_DROP (docs/PROTOCOL.md).
 * RM_SELF: the requester marks the removed non-directory's cached
 * attributes stale itself; it gets no CB_BREAK for that object. */
/* RM_FID: remove the name only if it names the request's victim FID;
 * otherwise -ENOENT, as if done already (a removal answered by the client
 * and sent later: idempotent when sent again). */
enum { RM_DIR = 1u << 0, RM_KEEP = 1u << 1, RM_SELF = 1u << 2,
       RM_FID = 1u << 3 };
/* RENAME flags: the Linux renameat2() values, and RN_KEEP: as RM_KEEP,
 * for the target the rename replaces. */
enum { RN_NOREPLACE = 1u << 0, RN_EXCHANGE = 1u << 1, RN_KEEP = 1u << 8 };
/* CB_BREAK record flags. CB_ORPHANED: the record's object became an orphan
 * (RM_KEEP/RN_KEEP) and this client, which held a promise on it, is now
 * one of its holders: it drops it with ORPHAN_DROP once it no longer has
 * it open (docs/PROTOCOL.md). */
/* CB_ATTRS_ONLY: the object's change was to attributes only (mode, owner,
 * links, xattrs, and with them ctime), not to its data, size or times;
 * without it, any of those may have changed. */
enum { CB_ORPHANED = 1u << 0, CB_ATTRS_ONLY = 1u << 1 };
/* WRITE flags. WR_KEEPTIME: leave mtime and ctime as they are; the
 * writer's kernel keeps them (FUSE writeback cache) and sets them with a
 * SETATTR (SA_MTIME | SA_CTIME) when it writes the inode back. */
enum { WR_SYNC = 1u << 0, WR_KEEPTIME = 1u << 1, WR_TOKEN = 1u << 2 };
/*
 * Write tokens (WTOKEN, docs/PROTOCOL.md "Write tokens"). A client that
 * holds a regular file's token may keep changes to it that it has not
 * sent; before any other client reads or changes the file, the server
 * recalls the token (CB_RECALL) and waits for the holder to send them and
 * give it back (WT_RETURN), at most the server's recall timeout. WT_DV:
 * grant only if the file's data version is still the request's dv.
 * WR_TOKEN on a WRITE, SA_TOKEN on a SETATTR: apply only while the
 * requester holds the file's token; otherwise -ECANCELED.
 */
enum { WT_RETURN = 1u << 0, WT_DV = 1u << 1 };
/*
 * Locks (LOCK, GETLK; docs/PROTOCOL.md "Locks"). Types: LK_RD (shared),
 * LK_WR (exclusive), LK_UN (release; in a GETLK reply: no conflict).
 * Flags: LK_FLOCK: a whole-file flock lock (flock and POSIX locks do not
 * conflict with each other); LK_WAIT: on a conflict, answer -EAGAIN and
 * push CB_LOCKWAKE when the file's locks change, so the client asks
 * again; LK_RECLAIM: a lock the client held before a reconnect or a
 * server restart (granted only in the grace period, or if still held);
 * LK_CANCEL: the owner no longer waits for fid (type ignored);
 * LK_RETURN (with LK_UN): also give back the requester's write token on
 * fid, as WTOKEN WT_RETURN would (the next holder's reads need no recall).
 */
enum { LK_UN = 0, LK_RD = 1, LK_WR = 2 };
enum { LK_FLOCK = 1u << 0, LK_WAIT = 1u << 1, LK_RECLAIM = 1u << 2,
       LK_CANCEL = 1u << 3, LK_RETURN = 1u << 4 };
/*
 * Delegated locks (LOCKD, LKRETURN, CB_LKRECALL; docs/PROTOCOL.md
 * "Delegated locks"). LKD_DELEG in a LOCKD reply: every lock of the file
 * is this client's to grant itself until it is recalled. GETLK with
 * LK_DELEG: the client understands -EINPROGRESS (another client's
 * delegation is being recalled: ask again after CB_LOCKWAKE), as every
 * LOCKD requester does. LKR_TOKEN on an LKRETURN: also give back the
 * write token, as LK_RETURN does.
 */
enum { LKD_DELEG = 1u << 0 };
enum { LK_DELEG = 1u << 5 };
enum { LKR_TOKEN = 1u << 0 };
/* Locks one LKRETURN carries at most (the client holds at most
 * LK_MAX_PER_CLIENT in all). */
#define CAIRN_LKRETURN_MAX 65536u
/* BULKSTAT flags. */
enum { BS_LIST = 1u << 0 };
/* Largest BULKSTAT page the server builds (its entries' bytes). */
#define CAIRN_BULKSTAT_MAX   (256u * 1024u)
/* Most FIDs one ORPHAN_DROP may list (more: -EINVAL). */
#define CAIRN_ORPHAN_DROP_MAX 1024u
/* Entries one REMOVES carries at most: each records two changes (the
 * name, the object) and one request's changes go in one break call
 * (server/handlers.h, HANDLER_MAX_CHANGES). */
#define CAIRN_REMOVES_MAX 16u
/* Entries one CREATES carries at most (one change each, and the reply's
 * attributes), and the first bytes each may carry. */
#define CAIRN_CREATES_MAX 16u
#define CAIRN_CREATES_DATA_MAX (16u * 1024u)
/* ... or, where the server says HELLO_REP_CREATES_BIG, this much each
 * (and at most CAIRN_MAX_IO in all). */
#define CAIRN_CREATES_BIG_MAX (256u * 1024u)
/* FSYNC flags. */
enum { FS_DATASYNC = 1u << 0 };
/* SETXATTR flags: the Linux XATTR_CREATE / XATTR_REPLACE values. */
enum { XA_CREATE = 1u << 0, XA_REPLACE = 1u << 1 };

/* READDIR cookies: 0 = start; 1 and 2 are reserved for "." and ".." (the
 * client synthesises those); server entries use cookies >= 3. */
#define CAIRN_COOKIE_FIRST 3u

/* File identifier: volume, vnode, uniquifier. Never a path. */
struct cairn_fid {
	uint32_t vol;
	uint64_t vnode;
	uint32_t uniq;
};

static inline int cairn_fid_eq(const struct cairn_fid *a,
			       const struct cairn_fid *b)
{
	return a->vnode == b->vnode && a->uniq == b->uniq && a->vol == b->vol;
}

struct cairn_time {
	int64_t  sec;
	uint32_t nsec;
};

/* Attributes of one object as the server knows them. */
struct cairn_attr {
	struct cairn_fid fid;
	uint32_t mode;   /* type and permission bits, as st_mode */
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint32_t rdev;   /* Linux dev_t encoding (makedev) for device nodes */
	uint64_t size;
	uint64_t blocks; /* 512-byte blocks allocated on the server */
	struct cairn_time atime, mtime, ctime;
	uint64_t dv;     /* data version: changes on every modification */
};

struct cairn_statfs {
	uint64_t blocks, bfree, bavail, files, ffree;
	uint32_t bsize, namemax;
};

/* Wire sizes of the fixed-size types. */
#define WIRE_FID_SIZE  16u
#define WIRE_TIME_SIZE 12u    /* i64 sec, u32 nsec */
/* fid 16 + mode,nlink,uid,gid,rdev 20 + size 8 + blocks 8 + 3 times 36 + dv 8 */
#define WIRE_ATTR_SIZE 96u

#endif
