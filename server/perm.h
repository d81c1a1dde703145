/*
 * perm.h - the server's own permission checks (docs/SECURITY.md).
 *
 * A request made for a user carries that user's credentials (WF_CRED,
 * docs/PROTOCOL.md "Credentials"): uid, gid and up to CRED_MAX_GROUPS
 * supplementary groups, with uid 0 squashed to nobody unless the server
 * runs with --no-root-squash. The handlers check them as a local file
 * system would, before they call the store: search permission on a
 * directory to look a name up in it, write and search permission to
 * change its entries, the sticky bit, owner-only attribute changes, read
 * and write permission on file data. Requests without credentials are
 * the client daemon's own (write-back shipping, read-ahead of listings,
 * atimes): the daemon holds the cell key and its kernel checked the
 * opens they come from.
 */
#ifndef CAIRN_PERM_H
#define CAIRN_PERM_H

#include <stdint.h>

#include "../lib/proto.h"

#define CRED_NOBODY 65534u

struct cairn_cred {
	int present;               /* 0: the daemon's own request */
	int squashed;              /* uid 0 mapped to nobody */
	uint32_t uid, gid;
	uint32_t ngroups;
	uint32_t groups[CRED_MAX_GROUPS];
};

enum { PERM_R = 4, PERM_W = 2, PERM_X = 1 };

/* Parse the credential block at the start of a WF_CRED payload; returns
 * its length in bytes, or -EPROTO. Root squash applies unless
 * no_root_squash. */
int cred_decode(const uint8_t *p, uint32_t len, int no_root_squash,
		struct cairn_cred *cr);

/* 1 if cr is in group gid (primary or supplementary). */
int perm_in_group(const struct cairn_cred *cr, uint32_t gid);
/* 1 if cr may act as the owner of a (its uid, or root). */
int perm_owner(const struct cairn_cred *cr, const struct cairn_attr *a);
/* 0 if cr has every access bit of want (PERM_*) on a, else -EACCES.
 * Root has all but execute of a file with no execute bit. */
int perm_check(const struct cairn_cred *cr, const struct cairn_attr *a,
	       int want);
/* The sticky bit: 0 if cr may remove or rename victim from dir, else
 * -EPERM (dir sticky, and cr owns neither, and is not root). */
int perm_sticky(const struct cairn_cred *cr, const struct cairn_attr *dir,
		const struct cairn_attr *victim);

#endif
