/*
 * store_rec.h - the byte layout of every record the store keeps in LMDB,
 * as pure functions: no LMDB, no I/O, no allocation, no global state.
 *
 * Decoders, one per record kind (each a fuzz target):
 *   store_rec_inode_decode       inodes value         -> struct sinode
 *   store_rec_dirent_key_decode  dirents key          -> dir vnode, name
 *   store_rec_dirent_decode      dirents value        -> struct store_rec_dirent
 *   store_rec_dirseq_key_decode  dirseq key           -> dir vnode, cookie
 *   store_rec_name_decode        dirseq value         -> name
 *   store_rec_meta_u32_decode    meta "format", "volume"
 *   store_rec_meta_u64_decode    meta "next_vnode"
 *   store_rec_meta_id_decode     meta "server_id"
 *   store_rec_symlink_decode     symlinks value       -> target
 *   store_rec_xattr_key_decode   xattrs key           -> vnode, name
 *   store_rec_xattr_val_decode   xattrs value         -> bytes
 *   store_rec_orphan_key_decode  orphans key          -> vnode
 *   store_rec_orphan_decode      orphans value        -> holders (client ids)
 * and the encoders of the values the store builds here (inode, dirent,
 * meta numbers); decode(encode(x)) == x for every x the store writes.
 *
 * Contract shared by every decoder: it reads exactly the n bytes at p
 * (p may be NULL when n is 0) and nothing else, never writes more than the
 * output buffer its signature names, and returns 0 or -EUCLEAN (the
 * kernel's EFSCORRUPTED, what ext4 gives for a corrupt on-disk structure)
 * for a record that is not exactly what the store writes: wrong length,
 * unknown version or flag bits, non-zero reserved bytes, invalid file
 * types, names the namespace would refuse. Outputs are undefined on error.
 *
 * Layouts (integers little-endian inside values, big-endian in keys so
 * cursors walk in order):
 *   inode    u8 version (1), u8 flags (SINODE_*), u16 zero,
 *            u32 mode, nlink, uid, gid, rdev, uniq,
 *            u64 size, dv, next_cookie, parent,
 *            3 x (i64 sec, u32 nsec): atime, mtime, ctime   (100 bytes)
 *   dirent   key BE8 dir + name; value u64 child, u64 cookie, u32 type
 *   dirseq   key BE8 dir + BE8 cookie; value name
 *   symlink  key BE8 vnode; value target (1..CAIRN_SYMLINK_MAX bytes)
 *   xattr    key BE8 vnode + name; value 0..CAIRN_XATTR_SIZE_MAX bytes
 *   orphan   key BE8 vnode; value the 16-byte client ids holding it, 1 to
 *            STORE_REC_HOLDERS_MAX of them, strictly ascending
 *   inline   key BE8 vnode; value the file's bytes, exactly its size (at
 *            most STORE_INLINE_MAX; none for an empty file)
 *   meta     key string; value u32 / u64 / 16 bytes
 */
#ifndef CAIRN_STORE_REC_H
#define CAIRN_STORE_REC_H

#include <stddef.h>
#include <stdint.h>
#include "../lib/proto.h"

#define STORE_REC_INODE_VERSION 1u
#define STORE_REC_INODE_SIZE    (4 + 6 * 4 + 4 * 8 + 3 * 12)
#define STORE_REC_DIRENT_SIZE   20
#define STORE_REC_ID_SIZE       16
#define STORE_REC_HOLDER_SIZE   16
#define STORE_REC_HOLDERS_MAX   1024

/* sinode.flags; the decoder refuses unknown bits. */
#define SINODE_DATA_LOST 0x01u /* a sync of its data file failed */
#define SINODE_INLINE    0x02u /* a regular file whose bytes are its
				* inline record (store_int.h), no data file */
#define SINODE_FLAGS_ALL (SINODE_DATA_LOST | SINODE_INLINE)

/* In-memory form of an inode record. parent is the containing directory
 * for directories (their ".."); 0 for other objects, which may have many. */
struct sinode {
	uint32_t mode, nlink, uid, gid, rdev, uniq;
	uint32_t flags; /* SINODE_* */
	uint64_t size, dv, next_cookie, parent;
	struct cairn_time atime, mtime, ctime;
};

/* A directory entry's value: the object it names and the entry's cookie
 * (its key in dirseq). type is the object's S_IFMT bits. */
struct store_rec_dirent {
	uint64_t child, cookie;
	uint32_t type;
};

/* mode: a file type the store creates, and permission bits only. */
int store_rec_inode_decode(const void *p, size_t n, struct sinode *out);
void store_rec_inode_encode(const struct sinode *in,
			    uint8_t out[STORE_REC_INODE_SIZE]);

/* child != 0, type one the store creates. */
int store_rec_dirent_decode(const void *p, size_t n,
			    struct store_rec_dirent *out);
void store_rec_dirent_encode(const struct store_rec_dirent *in,
			     uint8_t out[STORE_REC_DIRENT_SIZE]);

/*
 * Names, as store_name_check accepts them: 1..CAIRN_NAME_MAX bytes, no
 * '/' or NUL, not "." or "..". name gets them NUL-terminated (a buffer of
 * CAIRN_NAME_MAX + 1 bytes), *len their length.
 */
int store_rec_name_decode(const void *p, size_t n,
			  char name[CAIRN_NAME_MAX + 1], size_t *len);
int store_rec_dirent_key_decode(const void *p, size_t n, uint64_t *dir,
				char name[CAIRN_NAME_MAX + 1], size_t *len);
int store_rec_dirseq_key_decode(const void *p, size_t n, uint64_t *dir,
				uint64_t *cookie);

int store_rec_meta_u32_decode(const void *p, size_t n, uint32_t *out);
int store_rec_meta_u64_decode(const void *p, size_t n, uint64_t *out);
void store_rec_meta_u32_encode(uint32_t v, uint8_t out[4]);
void store_rec_meta_u64_encode(uint64_t v, uint8_t out[8]);
int store_rec_meta_id_decode(const void *p, size_t n,
			     uint8_t id[STORE_REC_ID_SIZE]);

/* 1..CAIRN_SYMLINK_MAX bytes, no NUL; target gets it NUL-terminated (a
 * buffer of CAIRN_SYMLINK_MAX + 1 bytes). */
int store_rec_symlink_decode(const void *p, size_t n,
			     char target[CAIRN_SYMLINK_MAX + 1], size_t *len);

/* Key BE8 vnode + 1..CAIRN_XATTR_NAME_MAX bytes without NUL. */
int store_rec_xattr_key_decode(const void *p, size_t n, uint64_t *vn,
			       char name[CAIRN_XATTR_NAME_MAX + 1],
			       size_t *len);
/*
 * A value of at most CAIRN_XATTR_SIZE_MAX bytes. *len = its length; when
 * size > 0 it is copied into buf, or -ERANGE if longer than size (the
 * getxattr rule: not a corrupt record, a too small buffer).
 */
int store_rec_xattr_val_decode(const void *p, size_t n, void *buf,
			       size_t size, size_t *len);

/*
 * An orphan (store.h): key BE8 vnode, not 0; value the 16-byte client ids
 * (HELLO's) of the clients that hold it, 1 to STORE_REC_HOLDERS_MAX, in
 * strictly ascending memcmp order (a value of one id is the format from
 * before several holders). store_rec_orphan_decode checks p and sets
 * *count: holder i is the 16 bytes at p + 16 * i.
 */
int store_rec_orphan_key_decode(const void *p, size_t n, uint64_t *vn);
int store_rec_orphan_decode(const void *p, size_t n, size_t *count);

#endif
