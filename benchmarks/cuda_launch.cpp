// The CUDA launch path without Python (issue 47): launch + sync per kernel and batch size, from C++.
//
//   cuda_launch LIB PREFIX TAG KERNELS SIZES [MIN_MS]
//   cuda_launch build/rbd_iiwa14_cuda.so rbd_iiwa14 f64 rnea,aba_derivatives 1,16,128,65536 5
//
// Plain C++ (g++, no CUDA toolkit): it dlopens a library rbdgen built and finds everything by
// name — each kernel's graph-capturable launch <prefix>_<kernel>_<tag>_cuda_v (the arrays in one
// list), its workspace size, the description of its arrays (<…>_arrays: "q:7 v:7 a:7 -> tau:7"),
// and the runtime's streams, memory, copies and graphs (the library links the CUDA runtime
// statically). For each kernel and N it prints one JSON line of microseconds per call (median of
// 5 rounds of at least MIN_MS milliseconds each, wall clock):
//
//   launch_sync_us  _cuda_v then a stream synchronisation: one call end to end, kernel included
//   graph_sync_us   the same launch captured once into a CUDA graph, replayed, synchronised
//   launch_us       back-to-back launches, one synchronisation per round: the launch rate (or the
//                   kernel's time, whichever is longer)
//   host_us         <prefix>_<kernel>_<tag>_host_v: host arrays in and out (pinned staging, one
//                   copy each way, a wait), as the NumPy path of rbdgen's Python runtime calls it
//
// Inputs are 0.5 everywhere (a unit quaternion for a floating base: timing does not depend on
// the values). Exit status 1 where the library, a symbol or the GPU is missing.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Stream = void*;
using CudaV = int (*)(Stream, long, void* const*, int, void*);
using HostV = int (*)(long, void* const*, int);
using Workspace = int (*)(long, int, size_t*);
using Str = const char* (*)(int);
using Count = int (*)();
using StreamCreate = int (*)(Stream*);
using StreamFn = int (*)(Stream);
using Malloc = int (*)(void**, size_t);
using Free = int (*)(void*);
using Memcpy = int (*)(void*, const void*, size_t);
using GraphEnd = int (*)(Stream, void**);
using GraphLaunch = int (*)(void*, Stream);
using GraphDestroy = int (*)(void*);

void* lib = nullptr;
std::string prefix;

template <typename F>
F sym(const std::string& name) {
  void* p = dlsym(lib, name.c_str());
  if (p == nullptr) {
    std::fprintf(stderr, "cuda_launch: %s not found in the library\n", name.c_str());
    std::exit(1);
  }
  return reinterpret_cast<F>(p);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, sep);)
    if (!x.empty()) out.push_back(x);
  return out;
}

void check(int err, const char* what) {
  if (err != 0) {
    std::fprintf(stderr, "cuda_launch: %s: CUDA error %d: %s\n", what, err, sym<Str>(prefix + "_error_string")(err));
    std::exit(1);
  }
}

// median over rounds of the seconds per call of `fn`, each round lasting at least min_s
template <typename F>
double per_call(F fn, double min_s, int rounds = 5) {
  using clock = std::chrono::steady_clock;
  fn(1);  // warm up
  auto t0 = clock::now();
  fn(1);
  const double one = std::max(std::chrono::duration<double>(clock::now() - t0).count(), 1e-7);
  const long reps = std::max(1L, static_cast<long>(min_s / one));
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    auto a = clock::now();
    fn(reps);
    t.push_back(std::chrono::duration<double>(clock::now() - a).count() / reps);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s LIB PREFIX TAG KERNELS SIZES [MIN_MS]\n", argv[0]);
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "cuda_launch: %s\n", dlerror());
    return 1;
  }
  prefix = argv[2];
  const std::string tag = argv[3];
  const auto kernels = split(argv[4], ',');
  std::vector<long> sizes;
  for (const auto& s : split(argv[5], ',')) sizes.push_back(std::stol(s));
  const double min_s = (argc > 6 ? std::atof(argv[6]) : 5.0) * 1e-3;
  const double elem = tag == "f32" ? 4.0 : 8.0;

  const int devices = sym<Count>(prefix + "_device_count")();
  if (devices <= 0) {
    std::fprintf(stderr, "cuda_launch: no CUDA GPU (%d)\n", devices);
    return 1;
  }
  auto stream_create = sym<StreamCreate>(prefix + "_stream_create");
  auto stream_sync = sym<StreamFn>(prefix + "_stream_sync");
  auto stream_destroy = sym<StreamFn>(prefix + "_stream_destroy");
  auto dmalloc = sym<Malloc>(prefix + "_malloc");
  auto dfree = sym<Free>(prefix + "_free");
  auto dcopy = sym<Memcpy>(prefix + "_memcpy");
  auto graph_begin = sym<StreamFn>(prefix + "_graph_begin");
  auto graph_end = sym<GraphEnd>(prefix + "_graph_end");
  auto graph_launch = sym<GraphLaunch>(prefix + "_graph_launch");
  auto graph_destroy = sym<GraphDestroy>(prefix + "_graph_destroy");
  Stream stream = nullptr;
  check(stream_create(&stream), "creating a stream");

  for (const auto& k : kernels) {
    const std::string base = prefix + "_" + k + "_" + tag;
    auto cuda_v = sym<CudaV>(base + "_cuda_v");
    auto host_v = sym<HostV>(base + "_host_v");
    auto workspace = sym<Workspace>(base + "_workspace");
    const std::string desc = sym<const char*>(base + "_arrays");
    // "q:7 v:7 a:7 -> tau:7": sizes per state, inputs then outputs
    std::vector<long> per;
    size_t n_in = 0;
    bool outputs = false;
    for (const auto& tok : split(desc, ' ')) {
      if (tok == "->") {
        outputs = true;
        continue;
      }
      per.push_back(std::stol(tok.substr(tok.find(':') + 1)));
      if (!outputs) ++n_in;
    }
    for (long n : sizes) {
      std::vector<void*> dev(per.size()), host(per.size());
      std::vector<std::vector<double>> hbuf(per.size());
      for (size_t i = 0; i < per.size(); ++i) {
        const size_t bytes = static_cast<size_t>(n * per[i] * elem);
        check(dmalloc(&dev[i], bytes), "allocating an array");
        hbuf[i].assign(static_cast<size_t>(n * per[i]), 0.5);
        if (tag == "f32") {
          auto* f = reinterpret_cast<float*>(hbuf[i].data());
          for (long j = 0; j < n * per[i]; ++j) f[j] = 0.5f;
        }
        host[i] = hbuf[i].data();
        if (i < n_in) check(dcopy(dev[i], host[i], bytes), "copying an input");
      }
      size_t ws_bytes = 0;
      check(workspace(n, 0, &ws_bytes), "asking for the workspace");
      void* ws = nullptr;
      if (ws_bytes) check(dmalloc(&ws, ws_bytes), "allocating the workspace");
      void* const* arrays = dev.data();
      const double launch_sync = per_call([&](long r) {
        for (long i = 0; i < r; ++i) {
          check(cuda_v(stream, n, arrays, 0, ws), "launch");
          check(stream_sync(stream), "synchronisation");
        }
      }, min_s);
      const double launch = per_call([&](long r) {
        for (long i = 0; i < r; ++i) check(cuda_v(stream, n, arrays, 0, ws), "launch");
        check(stream_sync(stream), "synchronisation");
      }, min_s);
      void* graph = nullptr;
      check(graph_begin(stream), "beginning a graph capture");
      const int captured = cuda_v(stream, n, arrays, 0, ws);
      check(graph_end(stream, &graph), "ending the graph capture");
      check(captured, "the captured launch");
      const double graph_sync = per_call([&](long r) {
        for (long i = 0; i < r; ++i) {
          check(graph_launch(graph, stream), "graph launch");
          check(stream_sync(stream), "synchronisation");
        }
      }, min_s);
      check(graph_destroy(graph), "destroying the graph");
      const double host_call = per_call([&](long r) {
        for (long i = 0; i < r; ++i) check(host_v(n, host.data(), 0), "host call");
      }, min_s);
      std::printf("{\"kernel\": \"%s\", \"n\": %ld, \"launch_sync_us\": %.3f, \"graph_sync_us\": %.3f, "
                  "\"launch_us\": %.3f, \"host_us\": %.3f, \"workspace_bytes\": %zu}\n",
                  k.c_str(), n, launch_sync * 1e6, graph_sync * 1e6, launch * 1e6, host_call * 1e6, ws_bytes);
      std::fflush(stdout);
      if (ws) check(dfree(ws), "freeing the workspace");
      for (void* p : dev) check(dfree(p), "freeing an array");
    }
  }
  check(stream_destroy(stream), "destroying the stream");
  return 0;
}
