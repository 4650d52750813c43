// Pinocchio + CppADCodeGen, the code generator half of the codegen peer (benchmarks/codegen_peer.py
// builds and runs it; see benchmarks/README.md, "The Pinocchio + CppADCodeGen peer").
//
//   pinocchio_codegen URDF fixed|floating OUTDIR KERNEL[,KERNEL…]
//
// Loads URDF with pinocchio::urdf::buildModel (a JointModelFreeFlyer root for "floating"), and
// for each KERNEL records Pinocchio's algorithm on CppAD::AD<CppAD::cg::CG<double>> scalars
// (pinocchio::CodeGenBase from <pinocchio/codegen/cppadcg-algo.hpp>, the base of Pinocchio's own
// CodeGenRNEA, CodeGenABA, …: its AD model, AD data and tape) with one independent vector, the
// inputs packed ([q, v, a], [q, v, tau] or q), optimises the tape (ad_fun.optimize("no_compare_op"),
// as Pinocchio's helpers do) and writes its C source through CppADCodeGen's model source
// generator: ModelCSourceGen (zero-order forward only, no Jacobian) → ModelLibraryCSourceGen →
// SaveFilesModelLibraryProcessor into OUTDIR/KERNEL/. (Pinocchio 4.1's own saveSources route does
// not compile against CppADCodeGen 2.4.3.) The function to call is
// `void KERNEL_forward_zero(double const *const *in, double *const *out, struct LangCAtomicFun)`.
//
// The outputs are rbdgen's layouts, so that the two can be compared entry by entry:
//   rnea, nle, gravity      τ (nv)
//   crba, crba_world        upper triangle of M, row by row (Pinocchio fills only that triangle)
//   aba, aba_world          q̈ (nv); Convention::LOCAL (pin::aba's default) or WORLD (CodeGenABA's)
//   minv                    upper triangle of M⁻¹, row by row (computeMinverse fills only that)
//   rnea_derivatives        ∂τ/∂q, ∂τ/∂v (nv×nv each, row-major; without ∂τ/∂a = M, which
//                           rbdgen's kernel does not return either: the tape drops its operations)
//   aba_derivatives         ∂q̈/∂q, ∂q̈/∂v, ∂q̈/∂τ = M⁻¹ (nv×nv each, row-major)
//   forward_kinematics      per joint 1…njoints−1: rows [R(r,0) R(r,1) R(r,2) p(r)], r = 0, 1, 2
//                           (rbdgen's oMb without its constant last row)
// Prints one JSON object: per kernel the input and output sizes, the seconds spent recording and
// writing the source, and the tape's operation count.
#include <pinocchio/codegen/cppadcg-algo.hpp>

#include <pinocchio/algorithm/kinematics.hpp>
#include <pinocchio/parsers/urdf.hpp>

#include <cppad/cg/model/save_files_model_library_processor.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace pin = pinocchio;

using Base = pin::CodeGenBase<double>;

// One kernel's tape: Pinocchio's CodeGenBase with buildMap given as a function of (AD model,
// AD data, packed inputs) writing the outputs
struct Recorder : Base {
  using Fill = std::function<void(ADModel &, ADData &, const ADVectorXs &, ADVectorXs &)>;
  Fill fill;

  Recorder(const Model &model, Eigen::Index n_in, Eigen::Index n_out, const std::string &name, Fill f,
           const VectorXs &x0)
      : Base(model, n_in, n_out, name, "rbd_peer"), fill(std::move(f)) {
    Base::build_jacobian = false;
    ad_X = x0.cast<ADScalar>();  // a valid state to record at (the tape has no branches on it)
  }

  void buildMap() override {
    CppAD::Independent(ad_X);
    fill(ad_model, ad_data, ad_X, ad_Y);
    ad_fun.Dependent(ad_X, ad_Y);
    ad_fun.optimize("no_compare_op");
  }

  size_t tape_ops() const { return ad_fun.size_op(); }

  // the C sources through CppADCodeGen's source generators, into dir
  void write_sources(const std::string &dir) {
    CppAD::cg::ModelCSourceGen<double> cgen(ad_fun, function_name);
    cgen.setCreateForwardZero(true);
    cgen.setCreateJacobian(false);
    CppAD::cg::ModelLibraryCSourceGen<double> libgen(cgen);
    CppAD::cg::SaveFilesModelLibraryProcessor<double>::saveLibrarySourcesTo(libgen, dir);
  }

  using Base::ad_X;
  using Base::ad_Y;
  using Base::ad_fun;
  using Base::function_name;
};

using ADVectorXs = Recorder::ADVectorXs;
using ADModel = Recorder::ADModel;
using ADData = Recorder::ADData;

template <typename M>
static void upper(const M &A, ADVectorXs &Y, Eigen::Index n) {
  Eigen::Index k = 0;
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = i; j < n; ++j) Y[k++] = A(i, j);
}

template <typename M>
static void rows(const M &A, ADVectorXs &Y, Eigen::Index &k) {
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) Y[k++] = A(i, j);
}

struct Kernel {
  const char *name;
  int in;   // 1: q, 3: q and two nv vectors
  int out;  // 0: nv, 1: upper triangle, 2: 2 nv×nv, 3: 3 nv×nv, 4: 12 per joint
  Recorder::Fill fill;
};

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s URDF fixed|floating OUTDIR KERNEL[,KERNEL...]\n", argv[0]);
    return 2;
  }
  const std::string urdf = argv[1], outdir = argv[3];
  const bool floating = std::strcmp(argv[2], "floating") == 0;
  pin::Model model;
  if (floating)
    pin::urdf::buildModel(urdf, pin::JointModelFreeFlyer(), model);
  else
    pin::urdf::buildModel(urdf, model);
  const Eigen::Index nq = model.nq, nv = model.nv;

  using Idx = Eigen::Index;
  auto q_of = [nq](const ADVectorXs &X) { return X.head(nq); };
  auto u_of = [nq, nv](const ADVectorXs &X, int k) { return X.segment(nq + k * nv, nv); };
  const std::vector<Kernel> kernels = {
      {"rnea", 3, 0, [&](ADModel &m, ADData &d, const ADVectorXs &X, ADVectorXs &Y) {
         Y = pin::rnea(m, d, ADVectorXs(q_of(X)), ADVectorXs(u_of(X, 0)), ADVectorXs(u_of(X, 1)));
       }},
      {"nle", 2, 0, [&](ADModel &m, ADData &d, const ADVectorXs &X, ADVectorXs &Y) {
         Y = pin::nonLinearEffects(m, d, ADVectorXs(q_of(X)), ADVectorXs(u_of(X, 0)));
       }},
      {"gravity", 1, 0, [&](ADModel &m, ADData &d, const ADVectorXs &X, ADVectorXs &Y) {
         Y = pin::computeGeneralizedGravity(m, d, ADVectorXs(q_of(X)));
       }},
      {"crba", 1, 1, [&](ADModel &m, ADData &d, const ADVectorXs &X, ADVectorXs &Y) {
         pin::crba(m, d, ADVectorXs(q_of(X)), pin::Convention::LOCAL);
         upper(d.M, Y, nv);
       }},
      {"crba_world", 1, 1, [&](ADModel &m, ADData &d, const ADVectorXs &X, ADVectorXs &Y) {
         pin::crba(m, d, ADVectorXs(q_of(X)), pin::Convention::WORLD);
         upper(d.M, Y, nv);
       }},
      {"aba", 3, 0, [&](ADModel &m, ADData &d, const ADVectorXs &X, ADVectorXs &Y) {
         Y = pin::aba(m, d, ADVectorXs(q_of(X)), ADVectorXs(u_of(X, 0)), ADVectorXs(u_of(X, 1)),
                      pin::Convention::LOCAL);
       }},
      {"aba_world", 3, 0, [&](ADModel &m, ADData &d, const ADVectorXs &X, ADVectorXs &Y) {
         Y = pin::aba(m, d, ADVectorXs(q_of(X)), ADVectorXs(u_of(X, 0)), ADVectorXs(u_of(X, 1)),
                      pin::Convention::WORLD);
       }},
      {"minv", 1, 1, [&](ADModel &m, ADData &d, const ADVectorXs &X, ADVectorXs &Y) {
         pin::computeMinverse(m, d, ADVectorXs(q_of(X)));
         upper(d.Minv, Y, nv);
       }},
      {"rnea_derivatives", 3, 2, [&](ADModel &m, ADData &d, const ADVectorXs &X, ADVectorXs &Y) {
         Recorder::ADMatrixXs dq = Recorder::ADMatrixXs::Zero(nv, nv), dv = dq, da = dq;
         pin::computeRNEADerivatives(m, d, ADVectorXs(q_of(X)), ADVectorXs(u_of(X, 0)), ADVectorXs(u_of(X, 1)),
                                     dq, dv, da);
         Idx k = 0;
         rows(dq, Y, k);
         rows(dv, Y, k);
       }},
      {"aba_derivatives", 3, 3, [&](ADModel &m, ADData &d, const ADVectorXs &X, ADVectorXs &Y) {
         Recorder::ADMatrixXs dq = Recorder::ADMatrixXs::Zero(nv, nv), dv = dq, dtau = dq;
         pin::computeABADerivatives(m, d, ADVectorXs(q_of(X)), ADVectorXs(u_of(X, 0)), ADVectorXs(u_of(X, 1)),
                                    dq, dv, dtau);
         Idx k = 0;
         rows(dq, Y, k);
         rows(dv, Y, k);
         rows(dtau, Y, k);
       }},
      {"forward_kinematics", 1, 4, [&](ADModel &m, ADData &d, const ADVectorXs &X, ADVectorXs &Y) {
         pin::forwardKinematics(m, d, ADVectorXs(q_of(X)));
         Idx k = 0;
         for (pin::JointIndex j = 1; j < (pin::JointIndex)m.njoints; ++j)
           for (int r = 0; r < 3; ++r) {
             for (int c = 0; c < 3; ++c) Y[k++] = d.oMi[j].rotation()(r, c);
             Y[k++] = d.oMi[j].translation()[r];
           }
       }},
  };

  // the state the tapes are recorded at: the neutral configuration (a unit quaternion) moved a
  // little, v and the third input 0.1 (the tape has no branch on the values; any valid state)
  std::srand(7);
  Eigen::VectorXd q0 = pin::neutral(model);
  const Eigen::Index first = floating ? 7 : 0;
  for (Eigen::Index i = first; i < nq; ++i) q0[i] += 0.1 * (i % 3);

  std::string want = std::string(",") + argv[4] + ",";
  std::printf("{\"nq\": %d, \"nv\": %d, \"njoints\": %d, \"pinocchio_version\": \"%s\", \"kernels\": {", (int)nq,
              (int)nv, (int)model.njoints, PINOCCHIO_VERSION);
  bool firstk = true;
  for (const Kernel &k : kernels) {
    if (want.find(std::string(",") + k.name + ",") == std::string::npos) continue;
    const Idx n_in = k.in == 1 ? nq : nq + (k.in - 1) * nv;
    const Idx n_out = k.out == 0   ? nv
                      : k.out == 1 ? nv * (nv + 1) / 2
                      : k.out == 4 ? 12 * (model.njoints - 1)
                                   : k.out * nv * nv;
    Eigen::VectorXd x0(n_in);
    x0.head(nq) = q0;
    for (Idx i = nq; i < n_in; ++i) x0[i] = 0.1;
    auto t0 = std::chrono::steady_clock::now();
    Recorder rec(model, n_in, n_out, k.name, k.fill, x0);
    rec.buildMap();
    const double record_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    rec.write_sources(outdir + "/" + k.name);
    const double source_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s\n  \"%s\": {\"n_in\": %ld, \"n_out\": %ld, \"record_s\": %.3f, \"source_s\": %.3f, \"tape_ops\": %zu}",
                firstk ? "" : ",", k.name, (long)n_in, (long)n_out, record_s, source_s, rec.tape_ops());
    std::fflush(stdout);
    firstk = false;
  }
  std::printf("\n}}\n");
  return 0;
}
