// Pinocchio timing harness for benchmarks/run.py (built and run by it; see benchmarks/README.md).
//
//   pinocchio_bench URDF fixed|floating [--pool 256] [--runs 7] [--target-ms 40] [--seed 1] [--model FILE]
//                   [--constraints FILE]
//
// --constraints: rigid contacts for constraintDynamics (the counterpart of rbdgen's constrained_fd),
// one per line "3d|6d JOINT r00 … r22 px py pz" (the contact frame's parent joint and its placement
// there, LOCAL; written by benchmarks/peers.py); the proximal solver runs one iteration with no
// regularisation (mu = 0), the exact rigid solution. Without the file constrained_fd is not timed.
//
// Loads URDF with pinocchio::urdf::buildModel (a JointModelFreeFlyer root for "floating"), or,
// with --model, builds the same model joint by joint from FILE (written by benchmarks/run.py
// from the pin module's URDF parser: see model_from_file). The second way is for a harness
// compiled with -march=native: the wheel's parser library is compiled for baseline x86-64, and a
// Model it fills in crashes a harness built for another instruction set (measured: heap
// corruption in ~Model with -march=native, also with EIGEN_MAX_ALIGN_BYTES=16 and without
// AVX-512), while every algorithm timed here is a header template compiled into the harness.
// run.py checks that both ways give the same checksum.
// draws a pool of random states (pinocchio::randomConfiguration within the model's limits,
// the free-flyer translation limited to [-1, 1]; v, a, tau uniform in [-1, 1]), then times each
// algorithm per call: one "pass" calls it once per state of the pool, a "run" is enough passes
// to last about --target-ms, and the reported figure ("median") is the median over --runs runs
// of (thread CPU time of the run / calls); the wall-clock figures come along ("wall_median",
// "wall_runs"). Prints one JSON object on stdout.
//
// Which algorithms it times comes from rbdgen's kernel registry: benchmarks/run.py writes
// pinocchio_benches.inc (the headers, and one {name, call} entry per kernel that declares a
// Pinocchio C++ counterpart) next to the executable and compiles this file with -I there.
#include <pinocchio/parsers/urdf.hpp>

#include <pinocchio/algorithm/joint-configuration.hpp>

#define RBD_PIN_HEADERS
#include "pinocchio_benches.inc"
#undef RBD_PIN_HEADERS

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace pin = pinocchio;
using Clock = std::chrono::steady_clock;

static double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

// CPU time of this thread: unlike the wall clock, it does not count the time the thread waits
// while other processes run on a busy machine
static double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

struct Timing {
  std::vector<double> cpu, wall;  // ns per call, one entry per run
};

// ns per call of body(i) over the pool, `runs` runs of about target_ms each
static Timing time_per_call(const std::function<void(int)> &body, int pool, int runs, double target_ms) {
  auto pass = [&]() {
    for (int i = 0; i < pool; ++i) body(i);
  };
  pass();  // warm up (caches, data allocation)
  double c0 = thread_cpu_ns();
  pass();
  double one = thread_cpu_ns() - c0;
  long passes = std::max(1L, (long)(target_ms * 1e6 / std::max(one, 1.0)));
  Timing t;
  for (int r = 0; r < runs; ++r) {
    auto w0 = Clock::now();
    c0 = thread_cpu_ns();
    for (long p = 0; p < passes; ++p) pass();
    double c = thread_cpu_ns() - c0;
    double w = std::chrono::duration<double, std::nano>(Clock::now() - w0).count();
    t.cpu.push_back(c / (double)(passes * pool));
    t.wall.push_back(w / (double)(passes * pool));
  }
  return t;
}

[[noreturn]] static void fail(const std::string &what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::exit(2);
}

// The model of FILE, one line per joint in index order, then the limits:
//   joint PARENT TYPE AX AY AZ R00 R01 R02 R10 R11 R12 R20 R21 R22 PX PY PZ MASS CX CY CZ IXX IXY IXZ IYY IYZ IZZ NAME
//   lower Q0 … | upper Q0 … | armature V0 …
// (the placement in the parent joint's frame, the inertia about the joint's origin frame:
// Pinocchio's jointPlacements[i] and inertias[i], which include the fixed links merged into it)
static pin::Model model_from_file(const std::string &path) {
  std::ifstream in(path);
  if (!in) fail("cannot read model file " + path);
  pin::Model model;
  std::string tag;
  while (in >> tag) {
    if (tag == "joint") {
      int parent;
      std::string type, name;
      Eigen::Vector3d axis, p, c;
      Eigen::Matrix3d R;
      double mass, I[6];
      in >> parent >> type >> axis[0] >> axis[1] >> axis[2];
      for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 3; ++k) in >> R(r, k);
      in >> p[0] >> p[1] >> p[2] >> mass >> c[0] >> c[1] >> c[2];
      for (double &x : I) in >> x;
      in >> name;
      if (!in) fail(path + ": malformed joint line");
      const pin::SE3 X(R, p);
      pin::JointIndex id;
      if (type == "JointModelFreeFlyer") id = model.addJoint(parent, pin::JointModelFreeFlyer(), X, name);
      else if (type == "JointModelRX") id = model.addJoint(parent, pin::JointModelRX(), X, name);
      else if (type == "JointModelRY") id = model.addJoint(parent, pin::JointModelRY(), X, name);
      else if (type == "JointModelRZ") id = model.addJoint(parent, pin::JointModelRZ(), X, name);
      else if (type == "JointModelRevoluteUnaligned") id = model.addJoint(parent, pin::JointModelRevoluteUnaligned(axis), X, name);
      else if (type == "JointModelRUBX") id = model.addJoint(parent, pin::JointModelRUBX(), X, name);
      else if (type == "JointModelRUBY") id = model.addJoint(parent, pin::JointModelRUBY(), X, name);
      else if (type == "JointModelRUBZ") id = model.addJoint(parent, pin::JointModelRUBZ(), X, name);
      else if (type == "JointModelRevoluteUnboundedUnaligned")
        id = model.addJoint(parent, pin::JointModelRevoluteUnboundedUnaligned(axis), X, name);
      else if (type == "JointModelPX") id = model.addJoint(parent, pin::JointModelPX(), X, name);
      else if (type == "JointModelPY") id = model.addJoint(parent, pin::JointModelPY(), X, name);
      else if (type == "JointModelPZ") id = model.addJoint(parent, pin::JointModelPZ(), X, name);
      else if (type == "JointModelPrismaticUnaligned") id = model.addJoint(parent, pin::JointModelPrismaticUnaligned(axis), X, name);
      else fail(path + ": joint type " + type + " not supported by model_from_file");
      Eigen::Matrix3d In;
      In << I[0], I[1], I[2], I[1], I[3], I[4], I[2], I[4], I[5];
      model.appendBodyToJoint(id, pin::Inertia(mass, c, In), pin::SE3::Identity());
    } else if (tag == "lower" || tag == "upper" || tag == "armature") {
      Eigen::VectorXd &x = tag == "lower" ? model.lowerPositionLimit
                           : tag == "upper" ? model.upperPositionLimit : model.armature;
      for (Eigen::Index i = 0; i < x.size(); ++i) in >> x[i];
      if (!in) fail(path + ": malformed " + tag + " line");
    } else {
      fail(path + ": unknown line " + tag);
    }
  }
  return model;
}

static void print_list(const std::vector<double> &x) {
  std::printf("[");
  for (size_t r = 0; r < x.size(); ++r) std::printf("%s%.2f", r ? ", " : "", x[r]);
  std::printf("]");
}

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s URDF fixed|floating [--pool N] [--runs N] [--target-ms X] [--seed N] [--model FILE]\n",
                 argv[0]);
    return 2;
  }
  const std::string urdf = argv[1];
  const bool floating = std::strcmp(argv[2], "floating") == 0;
  int pool = 256, runs = 7;
  unsigned seed = 1;
  double target_ms = 40.0;
  std::string model_file, constraints_file;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--pool")) pool = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--target-ms")) target_ms = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed")) seed = (unsigned)std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--model")) model_file = argv[i + 1];
    else if (!std::strcmp(argv[i], "--constraints")) constraints_file = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }

  pin::Model model;
  if (!model_file.empty())
    model = model_from_file(model_file);
  else if (floating)
    pin::urdf::buildModel(urdf, pin::JointModelFreeFlyer(), model);
  else
    pin::urdf::buildModel(urdf, model);
  if (floating) {
    // the free-flyer's translation limits are infinite: randomConfiguration needs finite ones
    model.lowerPositionLimit.head<3>().setConstant(-1.0);
    model.upperPositionLimit.head<3>().setConstant(1.0);
  }
  pin::Data data(model);

  std::srand(seed);  // Eigen's Random and randomConfiguration draw from std::rand
  std::vector<Eigen::VectorXd> q(pool), v(pool), a(pool), tau(pool);
  for (int i = 0; i < pool; ++i) {
    q[i] = pin::randomConfiguration(model);
    v[i] = Eigen::VectorXd::Random(model.nv);
    a[i] = Eigen::VectorXd::Random(model.nv);
    tau[i] = Eigen::VectorXd::Random(model.nv);
  }

  // the rigid contacts of constrained_fd (--constraints), and the solver's settings: exact (mu = 0)
  PINOCCHIO_STD_VECTOR_WITH_EIGEN_ALLOCATOR(pin::RigidConstraintModel) rbd_cmodels;
  PINOCCHIO_STD_VECTOR_WITH_EIGEN_ALLOCATOR(pin::RigidConstraintData) rbd_cdatas;
  pin::ProximalSettings rbd_prox(1e-12, 0.0, 1);
  if (!constraints_file.empty()) {
    std::ifstream in(constraints_file);
    if (!in) fail("cannot read constraints file " + constraints_file);
    std::string kind;
    int joint;
    while (in >> kind >> joint) {
      Eigen::Matrix3d R;
      Eigen::Vector3d p;
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) in >> R(r, c);
      in >> p[0] >> p[1] >> p[2];
      if (!in || (kind != "3d" && kind != "6d")) fail(constraints_file + ": malformed line");
      rbd_cmodels.emplace_back(kind == "6d" ? pin::CONTACT_6D : pin::CONTACT_3D, model, (pin::JointIndex)joint,
                               pin::SE3(R, p), pin::LOCAL);
      rbd_cdatas.emplace_back(rbd_cmodels.back());
    }
    pin::initConstraintDynamics(model, data, rbd_cmodels, rbd_cdatas);
  }

  struct Bench {
    const char *name;
    std::function<void(int)> body;
  };
  const std::vector<Bench> benches = {
#include "pinocchio_benches.inc"
  };

  double checksum = 0.0;
  std::printf("{\n  \"pinocchio_version\": \"%s\",\n  \"eigen_version\": \"%d.%d.%d\",\n", PINOCCHIO_VERSION,
              EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION);
  std::printf("  \"eigen_max_align_bytes\": %d,\n", (int)EIGEN_MAX_ALIGN_BYTES);
  std::printf("  \"nq\": %d, \"nv\": %d, \"njoints\": %d, \"pool\": %d, \"runs\": %d, \"target_ms\": %g,\n",
              (int)model.nq, (int)model.nv, (int)model.njoints, pool, runs, target_ms);
  std::printf("  \"ns_per_call\": {");
  int printed = 0;
  for (size_t b = 0; b < benches.size(); ++b) {
    if (rbd_cmodels.empty() && !std::strcmp(benches[b].name, "constrained_fd")) continue;  // no constraints given
    Timing t = time_per_call(benches[b].body, pool, runs, target_ms);
    checksum += data.tau.sum() + data.M(0, 0) + data.Minv(0, 0) + data.oMi.back().translation().sum();
    std::printf("%s\n    \"%s\": {\"median\": %.2f, \"min\": %.2f, \"wall_median\": %.2f, \"runs\": ", printed++ ? "," : "",
                benches[b].name, median(t.cpu), *std::min_element(t.cpu.begin(), t.cpu.end()), median(t.wall));
    print_list(t.cpu);
    std::printf(", \"wall_runs\": ");
    print_list(t.wall);
    std::printf("}");
  }
  std::printf("\n  },\n  \"checksum\": \"%.17g\"\n}\n", checksum);
  return 0;
}
