/*
 * perm.c - the server's own permission checks: see perm.h.
 */
#include <errno.h>
#include <sys/stat.h>

#include "../lib/wire.h"
#include "perm.h"

int cred_decode(const uint8_t *p, uint32_t len, int no_root_squash,
		struct cairn_cred *cr)
{
	struct rbuf r;

	rbuf_init(&r, p, len);
	cr->uid = wire_get_u32(&r);
	cr->gid = wire_get_u32(&r);
	cr->ngroups = wire_get_u32(&r);
	if (r.err || cr->ngroups > CRED_MAX_GROUPS)
		return -EPROTO;
	for (uint32_t i = 0; i < cr->ngroups; i++)
		cr->groups[i] = wire_get_u32(&r);
	if (r.err)
		return -EPROTO;
	cr->present = 1;
	cr->squashed = 0;
	if (cr->uid == 0 && !no_root_squash) {
		cr->uid = cr->gid = CRED_NOBODY;
		cr->ngroups = 0;
		cr->squashed = 1;
	}
	return (int)r.off;
}

int perm_in_group(const struct cairn_cred *cr, uint32_t gid)
{
	if (cr->gid == gid)
		return 1;
	for (uint32_t i = 0; i < cr->ngroups; i++)
		if (cr->groups[i] == gid)
			return 1;
	return 0;
}

int perm_owner(const struct cairn_cred *cr, const struct cairn_attr *a)
{
	return cr->uid == 0 || cr->uid == a->uid;
}

int perm_check(const struct cairn_cred *cr, const struct cairn_attr *a,
	       int want)
{
	unsigned bits;

	if (cr->uid == 0) {
		/* Root reads and writes anything, and searches any
		 * directory; it executes only what someone may. */
		if ((want & PERM_X) && !S_ISDIR(a->mode) &&
		    !(a->mode & (S_IXUSR | S_IXGRP | S_IXOTH)))
			return -EACCES;
		return 0;
	}
	if (cr->uid == a->uid)
		bits = (a->mode >> 6) & 7;
	else if (perm_in_group(cr, a->gid))
		bits = (a->mode >> 3) & 7;
	else
		bits = a->mode & 7;
	return ((unsigned)want & ~bits) ? -EACCES : 0;
}

int perm_sticky(const struct cairn_cred *cr, const struct cairn_attr *dir,
		const struct cairn_attr *victim)
{
	if (!(dir->mode & S_ISVTX) || cr->uid == 0 || cr->uid == dir->uid ||
	    cr->uid == victim->uid)
		return 0;
	return -EPERM;
}
