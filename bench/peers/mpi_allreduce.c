/* The Open MPI peer of `h2 comm-bench`: MPI_Allreduce (MPI_FLOAT, MPI_SUM), a ring of
 * MPI_Sendrecv (to rank + 1, from rank - 1) or MPI_Barrier (every row the same call, no check)
 * over the same sizes and flags, printed in the same nccl-tests table so that both read row by
 * row. Each half of a row: fill, one untimed call,
 * barrier, -n timed calls (MPI_Wtime), mean per call, maximum over ranks; then refill, one call
 * and a check against the analytic result (element i of rank r is (r + i) mod 7).
 * Usage: mpirun -np N h2_peer_mpi [all_reduce|sendrecv|barrier] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS]
 *        [-w WARMUP] [-c 0|1]     (sizes take K, M, G suffixes, powers of 1024) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct options {
  int sendrecv, barrier;
  long long min_bytes, max_bytes, factor;
  int iters, warmup, check;
};

static long long parse_size(const char* flag, const char* text) {
  char* end = NULL;
  double value = strtod(text, &end);
  double unit = 1;
  if (*end == 'K' || *end == 'k')
    unit = 1024.0, ++end;
  else if (*end == 'M' || *end == 'm')
    unit = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g')
    unit = 1024.0 * 1024 * 1024, ++end;
  if (end == text || *end != '\0' || value < 0) {
    fprintf(stderr, "h2_peer_mpi: %s '%s': expected a size such as 8, 512K or 64M\n", flag, text);
    exit(2);
  }
  return (long long)(value * unit);
}

static struct options parse(int argc, char** argv) {
  struct options o = {0, 0, 32 << 20, 32 << 20, 2, 20, 5, 1};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!strcmp(a, "all_reduce") || !strcmp(a, "allreduce")) continue;
    if (!strcmp(a, "sendrecv")) {
      o.sendrecv = 1;
      continue;
    }
    if (!strcmp(a, "barrier")) {
      o.barrier = 1;
      continue;
    }
    if (a[0] != '-' || strlen(a) != 2 || i + 1 >= argc) {
      fprintf(stderr, "h2_peer_mpi: bad argument '%s' (see the usage in mpi_allreduce.c)\n", a);
      exit(2);
    }
    const char* v = argv[++i];
    switch (a[1]) {
      case 'b':
        o.min_bytes = parse_size("-b", v);
        break;
      case 'e':
        o.max_bytes = parse_size("-e", v);
        break;
      case 'f':
        o.factor = atoll(v);
        break;
      case 'n':
        o.iters = atoi(v);
        break;
      case 'w':
        o.warmup = atoi(v);
        break;
      case 'c':
        o.check = atoi(v);
        break;
      default:
        fprintf(stderr, "h2_peer_mpi: unknown flag '%s'\n", a);
        exit(2);
    }
  }
  if (o.factor < 2 || o.iters < 1 || o.min_bytes < 1 || o.min_bytes > o.max_bytes) {
    fprintf(stderr, "h2_peer_mpi: need -f >= 2, -n >= 1 and 1 <= -b <= -e\n");
    exit(2);
  }
  return o;
}

/* One call: out of place (send -> recv) or in place (recv only). */
static void call(const struct options* o, float* send, float* recv, int count, int in_place,
                 int rank, int size) {
  if (o->barrier) {
    MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
  if (!o->sendrecv) {
    MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return;
  }
  int to = (rank + 1) % size, from = (rank - 1 + size) % size;
  if (in_place)
    MPI_Sendrecv_replace(recv, count, MPI_FLOAT, to, 0, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  else
    MPI_Sendrecv(send, count, MPI_FLOAT, to, 0, recv, count, MPI_FLOAT, from, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
}

static void init(float* send, float* recv, int count, int in_place, int rank) {
  for (int i = 0; i < count; ++i) {
    recv[i] = in_place ? (float)((rank + i) % 7) : 99.0f;
    send[i] = (float)((rank + i) % 7);
  }
}

static long long count_wrong(const struct options* o, const float* recv, int count, int rank,
                             int size) {
  long long wrong = 0;
  for (int i = 0; i < count; ++i) {
    float want = 0;
    if (o->sendrecv)
      want = (float)(((rank - 1 + size) % size + i) % 7);
    else
      for (int r = 0; r < size; ++r) want += (float)((r + i) % 7);
    wrong += recv[i] != want;
  }
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return wrong;
}

static void format_time(char* out, double us) {
  sprintf(out, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
}

/* Prints one half of a row; returns its bus bandwidth. */
static double measure(const struct options* o, float* send, float* recv, int count, int in_place,
                      int rank, int size, long long* errors) {
  init(send, recv, count, in_place, rank);
  call(o, send, recv, count, in_place, rank, size);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < o->iters; ++i) call(o, send, recv, count, in_place, rank, size);
  double seconds = (MPI_Wtime() - start) / o->iters;
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  double algbw = (double)count * sizeof(float) / 1.0e9 / seconds;
  double factor = o->sendrecv ? 1.0 : 2.0 * (size - 1) / size;
  long long wrong = -1;
  if (o->check && !o->barrier) {
    init(send, recv, count, in_place, rank);
    call(o, send, recv, count, in_place, rank, size);
    wrong = count_wrong(o, recv, count, rank, size);
    if (wrong > 0) ++*errors;
  }
  char time[32];
  format_time(time, seconds * 1e6);
  if (rank == 0) {
    if (wrong < 0)
      printf("  %7s  %6.2f  %6.2f  %5s", time, algbw, algbw * factor, "N/A");
    else
      printf("  %7s  %6.2f  %6.2f  %5g", time, algbw, algbw * factor, (double)wrong);
  }
  return algbw * factor;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  struct options o = parse(argc, argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int max_count = (int)(o.max_bytes / (long long)sizeof(float));
  float* send = calloc((size_t)max_count + 1, sizeof(float));
  float* recv = calloc((size_t)max_count + 1, sizeof(float));

  char line[256], host[128] = {0};
  gethostname(host, sizeof(host) - 1);
  snprintf(line, sizeof(line), "#  Rank %2d Group  0 Pid %6d on %10s device cpu:0 [host] MPI\n",
           rank, (int)getpid(), host);
  char* lines = rank == 0 ? malloc(sizeof(line) * (size_t)size) : NULL;
  MPI_Gather(line, sizeof(line), MPI_CHAR, lines, sizeof(line), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length;
    MPI_Get_library_version(version, &length);
    version[strcspn(version, ",\n")] = '\0';
    printf("# h2_peer_mpi %s: %d rank%s, %s (MPI_FLOAT, MPI_SUM)\n",
           o.barrier ? "barrier" : o.sendrecv ? "sendrecv" : "all_reduce", size, size == 1 ? "" : "s", version);
    printf("# time: the maximum over ranks of the mean time per iteration\n");
    printf(
        "# nThread 1 nGpus 1 minBytes %lld maxBytes %lld step: %lld(factor) warmup iters: %d "
        "iters: %d agg iters: 1 validation: %d graph: 0\n#\n# Using devices\n",
        o.min_bytes, o.max_bytes, o.factor, o.warmup, o.iters, o.check);
    for (int r = 0; r < size; ++r) fputs(lines + r * sizeof(line), stdout);
    free(lines);
    printf(
        "#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
        "          \n",
        "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
    fflush(stdout);
  }

  /* nccl-tests warms up at the largest, then at the smallest size. */
  int warm_counts[2] = {max_count, (int)(o.min_bytes / (long long)sizeof(float))};
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < o.warmup; ++i) call(&o, send, recv, warm_counts[k], 0, rank, size);

  long long errors = 0;
  double busbw_sum = 0;
  int measured = 0;
  for (long long bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    int count = (int)(bytes / (long long)sizeof(float));
    if (rank == 0)
      printf("%12lld  %12d  %8s  %6s  %6i", (long long)count * (long long)sizeof(float), count,
             "float", o.sendrecv || o.barrier ? "none" : "sum", -1);
    busbw_sum += measure(&o, send, recv, count, 0, rank, size, &errors);
    busbw_sum += measure(&o, send, recv, count, 1, rank, size, &errors);
    measured += 2;
    if (rank == 0) {
      printf("\n");
      fflush(stdout);
    }
  }
  if (rank == 0) {
    printf("# Out of bounds values : %lld %s\n", errors, errors ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", measured ? busbw_sum / measured : 0.0);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return errors ? 1 : 0;
}
