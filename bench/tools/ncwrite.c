/*
 * ncwrite - a netCDF-3 classic-format writer shaped like a climate model's
 * history output, for the "many small writes" benchmark workload.
 *
 *   ncwrite [-r RECORDS] FILE
 *
 * It defines fixed variables with _FillValue attributes (fill mode on, so
 * enddef writes fill values), writes the coordinates, then RECORDS records
 * of several record variables written slab by slab: one latitude row per
 * nc_put_vara call, every variable's row in turn, as a model writes the
 * fields of one row once it has computed them (so consecutive puts land in
 * different parts of the record and the library's buffer keeps moving). Halfway
 * through it re-enters define mode to add an attribute and a variable,
 * which makes the library grow the header and move every byte already
 * written: the pattern that made netCDF 3.3.1 slow on NFS.
 *
 * Prints one line: ns=<elapsed including nc_close> records= puts= bytes=.
 */
#include <netcdf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NLEV 10
#define NLAT 64
#define NLON 128

static const char *rec_names[] = { "T", "U", "V", "Q", "PS" };
#define NREC_VARS ((int)(sizeof(rec_names) / sizeof(rec_names[0])))

#define CHECK(call)                                                       \
	do {                                                              \
		int rc_ = (call);                                         \
		if (rc_ != NC_NOERR) {                                    \
			fprintf(stderr, "ncwrite: %s: %s (line %d)\n",    \
				#call, nc_strerror(rc_), __LINE__);       \
			exit(1);                                          \
		}                                                         \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void put_fill_attr(int nc, int var, float fill)
{
	CHECK(nc_put_att_float(nc, var, "_FillValue", NC_FLOAT, 1, &fill));
}

int main(int argc, char **argv)
{
	int nrec = 200, opt, nc, d_time, d_lev, d_lat, d_lon, i, j, r, v;
	int v_time, v_lev, v_lat, v_lon, v_topo, v_mask, v_frac;
	int v_rec[NREC_VARS], dims[3];
	float lev[NLEV], lat[NLAT], lon[NLON], row[NLON];
	float *field;
	uint64_t t0, ns, puts = 0;
	struct stat st;
	char history[2048];

	while ((opt = getopt(argc, argv, "r:")) != -1) {
		if (opt != 'r') {
			fprintf(stderr, "usage: ncwrite [-r RECORDS] FILE\n");
			return 2;
		}
		nrec = atoi(optarg);
	}
	if (optind != argc - 1 || nrec < 1) {
		fprintf(stderr, "usage: ncwrite [-r RECORDS] FILE\n");
		return 2;
	}
	field = malloc(sizeof(float) * NLAT * NLON);
	if (!field)
		return 1;
	for (i = 0; i < NLEV; i++)
		lev[i] = 1000.0f - 100.0f * (float)i;
	for (i = 0; i < NLAT; i++)
		lat[i] = -90.0f + 180.0f * (float)i / (NLAT - 1);
	for (i = 0; i < NLON; i++)
		lon[i] = 360.0f * (float)i / NLON;

	t0 = now_ns();
	CHECK(nc_create(argv[optind], NC_CLOBBER, &nc));
	CHECK(nc_def_dim(nc, "time", NC_UNLIMITED, &d_time));
	CHECK(nc_def_dim(nc, "lev", NLEV, &d_lev));
	CHECK(nc_def_dim(nc, "lat", NLAT, &d_lat));
	CHECK(nc_def_dim(nc, "lon", NLON, &d_lon));
	CHECK(nc_def_var(nc, "time", NC_DOUBLE, 1, &d_time, &v_time));
	CHECK(nc_def_var(nc, "lev", NC_FLOAT, 1, &d_lev, &v_lev));
	CHECK(nc_def_var(nc, "lat", NC_FLOAT, 1, &d_lat, &v_lat));
	CHECK(nc_def_var(nc, "lon", NC_FLOAT, 1, &d_lon, &v_lon));
	dims[0] = d_lat;
	dims[1] = d_lon;
	CHECK(nc_def_var(nc, "topo", NC_FLOAT, 2, dims, &v_topo));
	put_fill_attr(nc, v_topo, -999.0f);
	CHECK(nc_def_var(nc, "mask", NC_FLOAT, 2, dims, &v_mask));
	put_fill_attr(nc, v_mask, -1.0f);
	dims[0] = d_time;
	dims[1] = d_lat;
	dims[2] = d_lon;
	for (v = 0; v < NREC_VARS; v++) {
		CHECK(nc_def_var(nc, rec_names[v], NC_FLOAT, 3, dims, &v_rec[v]));
		put_fill_attr(nc, v_rec[v], 1.0e20f);
		CHECK(nc_put_att_text(nc, v_rec[v], "units", 2, "SI"));
	}
	CHECK(nc_put_att_text(nc, NC_GLOBAL, "title", 14, "cairn ncwrite"));
	CHECK(nc_set_fill(nc, NC_FILL, NULL));
	CHECK(nc_enddef(nc));

	CHECK(nc_put_var_float(nc, v_lev, lev));
	CHECK(nc_put_var_float(nc, v_lat, lat));
	CHECK(nc_put_var_float(nc, v_lon, lon));
	/* Topography row by row; "mask" is left to its fill values. */
	for (j = 0; j < NLAT; j++) {
		size_t start[2] = { (size_t)j, 0 }, count[2] = { 1, NLON };
		for (i = 0; i < NLON; i++)
			row[i] = (float)(j * i % 4000);
		CHECK(nc_put_vara_float(nc, v_topo, start, count, row));
		puts++;
	}

	for (r = 0; r < nrec; r++) {
		double t = r * 3600.0;
		size_t tstart = (size_t)r;

		if (r == nrec / 2) {
			/* Midway: a new attribute and variable grow the header. */
			memset(history, 'h', sizeof(history) - 1);
			history[sizeof(history) - 1] = '\0';
			CHECK(nc_redef(nc));
			CHECK(nc_put_att_text(nc, NC_GLOBAL, "history",
					      strlen(history), history));
			dims[0] = d_lat;
			dims[1] = d_lon;
			CHECK(nc_def_var(nc, "landfrac", NC_FLOAT, 2, dims, &v_frac));
			put_fill_attr(nc, v_frac, -1.0f);
			CHECK(nc_enddef(nc));
			for (i = 0; i < NLAT * NLON; i++)
				field[i] = (float)(i % 100) / 100.0f;
			CHECK(nc_put_var_float(nc, v_frac, field));
			puts++;
		}
		CHECK(nc_put_var1_double(nc, v_time, &tstart, &t));
		puts++;
		for (j = 0; j < NLAT; j++) {
			for (v = 0; v < NREC_VARS; v++) {
				size_t start[3] = { (size_t)r, (size_t)j, 0 };
				size_t count[3] = { 1, 1, NLON };
				for (i = 0; i < NLON; i++)
					row[i] = (float)(r + v * 7 + j + i);
				CHECK(nc_put_vara_float(nc, v_rec[v], start, count, row));
				puts++;
			}
		}
	}
	CHECK(nc_close(nc));
	ns = now_ns() - t0;
	if (stat(argv[optind], &st) < 0) {
		perror("ncwrite: stat");
		return 1;
	}
	printf("ns=%llu records=%d puts=%llu bytes=%lld\n",
	       (unsigned long long)ns, nrec, (unsigned long long)puts,
	       (long long)st.st_size);
	fflush(stdout);	/* before any sanitizer report at exit */
	free(field);
	return 0;
}
