// gpukit bench kernels in CUDA C. Compiled at run time by NVRTC (cupy.RawModule, see cuda_c.py); also compiles
// with `nvcc -c -arch=sm_90`. Every entry point is extern "C" so its name is its symbol.
//
// Memory-bound kernels (vector add, SAXPY): a grid-stride loop over 16-byte vectors (float4/int4) with 64-bit
// indices, four vectors per thread per pass, the grid sized by the host to cover the array once; scalar head/tail loops cover the elements before the first
// 16-byte boundary and after the last whole vector, and everything when the three pointers are not co-aligned.
// The *_naive kernels are the seed's vectorAdd made correct (one element per thread, bounds check), kept as the
// comparison point.

typedef long long i64;
typedef unsigned long long u64;

template <typename T> struct Vec4;
template <> struct Vec4<float> { typedef float4 type; };
template <> struct Vec4<int> { typedef int4 type; };

// Signed overflow is undefined in C++; adding as unsigned wraps in two's complement, like numpy's int32.
__device__ __forceinline__ int add_wrap(int x, int y) { return (int)((unsigned)x + (unsigned)y); }
__device__ __forceinline__ float add_wrap(float x, float y) { return x + y; }

struct AddOp {
    template <typename T> __device__ __forceinline__ T operator()(T x, T y) const { return add_wrap(x, y); }
    template <typename V> __device__ __forceinline__ V vec(V x, V y) const {
        V r;
        r.x = add_wrap(x.x, y.x); r.y = add_wrap(x.y, y.y); r.z = add_wrap(x.z, y.z); r.w = add_wrap(x.w, y.w);
        return r;
    }
};

struct SaxpyOp {
    float alpha;
    __device__ __forceinline__ float operator()(float x, float y) const { return fmaf(alpha, x, y); }
    __device__ __forceinline__ float4 vec(float4 x, float4 y) const {
        return make_float4(fmaf(alpha, x.x, y.x), fmaf(alpha, x.y, y.y), fmaf(alpha, x.z, y.z), fmaf(alpha, x.w, y.w));
    }
};

// Elements to handle one by one before all three pointers reach a 16-byte boundary together; n (all scalar) when
// their offsets within 16 bytes differ, since no single split then aligns all three.
__device__ __forceinline__ i64 aligned_head(const void* a, const void* b, const void* c, i64 n, unsigned elem) {
    const unsigned ma = (unsigned)((u64)a & 15u);
    if ((unsigned)((u64)b & 15u) != ma || (unsigned)((u64)c & 15u) != ma || ma % elem != 0) return n;
    const i64 head = (i64)(((16u - ma) & 15u) / elem);
    return head < n ? head : n;
}

// One pass, like torch's and Triton's elementwise kernels: each thread moves STREAM_VECS 16-byte vectors per operand
// (a block covers STREAM_THREADS x STREAM_VECS consecutive vectors), and the host launches enough blocks to cover
// the array once (cuda_c.py). Blocks then retire in address order, keeping the DRAM traffic sequential; a first
// version that launched a single wave (SMs x 8 blocks) and strided over the whole array reached only 0.91-0.93 of
// torch.add at 1 GiB on an H200, against 0.956 for the Triton kernel that has this shape (2048 elements/program).
// The grid-stride loop stays so any n is covered whatever grid the host picks.
#define STREAM_THREADS 128
#define STREAM_VECS 4
// At least 8 resident blocks (1,024 threads) per SM: caps registers at 64 with no spills, so every SM keeps
// 8 x 128 x 2 x 64 bytes = 128 KiB of loads in flight, several times what HBM3e latency x bandwidth needs.
#define STREAM_MIN_BLOCKS 8

// out[i] = op(a[i], b[i]) for i < n.
template <typename T, typename Op>
__device__ __forceinline__ void stream2(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                        i64 n, Op op) {
    typedef typename Vec4<T>::type V;
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    const i64 head = aligned_head(a, b, out, n, sizeof(T));
    for (i64 i = tid; i < head; i += stride) out[i] = op(a[i], b[i]);

    const i64 nvec = (n - head) >> 2;
    const V* __restrict__ av = reinterpret_cast<const V*>(a + head);
    const V* __restrict__ bv = reinterpret_cast<const V*>(b + head);
    V* __restrict__ ov = reinterpret_cast<V*>(out + head);
    const i64 tile = (i64)blockDim.x * STREAM_VECS;  // vectors one block covers per pass
    for (i64 base = (i64)blockIdx.x * tile + threadIdx.x; base < nvec; base += (i64)gridDim.x * tile) {
        V va[STREAM_VECS], vb[STREAM_VECS];
        // All loads issued before any store: 2 x STREAM_VECS x 16 bytes in flight per thread.
#pragma unroll
        for (int k = 0; k < STREAM_VECS; ++k) {
            const i64 i = base + (i64)k * blockDim.x;  // consecutive threads, consecutive vectors: coalesced
            if (i < nvec) { va[k] = av[i]; vb[k] = bv[i]; }
        }
#pragma unroll
        for (int k = 0; k < STREAM_VECS; ++k) {
            const i64 i = base + (i64)k * blockDim.x;
            if (i < nvec) ov[i] = op.vec(va[k], vb[k]);
        }
    }

    for (i64 j = head + (nvec << 2) + tid; j < n; j += stride) out[j] = op(a[j], b[j]);
}

extern "C" __global__ void __launch_bounds__(STREAM_THREADS, STREAM_MIN_BLOCKS)
vector_add_f32(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, i64 n) {
    stream2(a, b, out, n, AddOp());
}

extern "C" __global__ void __launch_bounds__(STREAM_THREADS, STREAM_MIN_BLOCKS)
vector_add_i32(const int* __restrict__ a, const int* __restrict__ b, int* __restrict__ out, i64 n) {
    stream2(a, b, out, n, AddOp());
}

extern "C" __global__ void __launch_bounds__(STREAM_THREADS, STREAM_MIN_BLOCKS)
saxpy_f32(float alpha, const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out, i64 n) {
    SaxpyOp op;
    op.alpha = alpha;
    stream2(x, y, out, n, op);
}

// The seed's vectorAdd, made correct for any n: one element per thread, a bounds check, 64-bit index.
extern "C" __global__ void vector_add_naive_f32(const float* a, const float* b, float* out, i64 n) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

extern "C" __global__ void vector_add_naive_i32(const int* a, const int* b, int* out, i64 n) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = add_wrap(a[i], b[i]);
}

// Keeps the device busy for `cycles` SM clock cycles (one thread): the timing pad queued before a sample so the host
// can launch the timed calls while the device is still busy (bench/timing.py). Not a workload.
extern "C" __global__ void gpukit_spin(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

// ------------------------------------------------------------------------------------------------ Mandelbrot
//
// Count for pixel c = (cx, cy): the first n < max_iter with |z_n|^2 > 4 (z_0 = 0, z <- z^2 + c), else max_iter.
// The arithmetic is pinned with the _rn intrinsics, which the compiler never contracts, to exactly what the
// straightforward float32 Numba kernel compiles to (numba_cuda.mandelbrot_naive, checked in its PTX):
//   mag = zr*zr + zi*zi;  zi = fma(zr + zr, zi, cy);  zr = (zr*zr - zi*zi) + cx;  x = fma((float)col, dx, x0)
// so the counts match it pixel for pixel. Faster only by doing less:
//   1. points inside the main cardioid or the period-2 bulb never escape: answered max_iter without iterating;
//   2. escape is checked once per MANDEL_UNROLL steps (6 instructions a step instead of ~11), with a rewind to
//      the block's start and single steps when it fired, so the count is the same;
//   3. each warp covers an 8 x 4 tile of pixels rather than a 16 x 2 strip: neighbours escape at similar
//      counts, so fewer lanes idle while the slowest one finishes.

#define MANDEL_UNROLL 8

__device__ __forceinline__ void mandel_step(float& zr, float& zi, float& zr2, float& zi2, float cx, float cy) {
    zi = __fmaf_rn(__fadd_rn(zr, zr), zi, cy);
    zr = __fadd_rn(__fsub_rn(zr2, zi2), cx);
    zr2 = __fmul_rn(zr, zr);
    zi2 = __fmul_rn(zi, zi);
}

// Main cardioid: q(q + x - 1/4) <= y^2/4 with q = (x - 1/4)^2 + y^2; period-2 bulb: (x + 1)^2 + y^2 <= 1/16.
// Points inside never escape (standard, exact in real arithmetic). The 1e-5 margin is ten times the float32
// rounding of these tests, so a point just outside, which escapes only after many iterations, is never admitted.
__device__ __forceinline__ bool in_main_bulbs(float x, float y) {
    const float xm = x - 0.25f;
    const float y2 = y * y;
    const float q = xm * xm + y2;
    if (q * (q + xm) <= 0.25f * y2 - 1e-5f) return true;
    const float xp = x + 1.0f;
    return xp * xp + y2 <= 0.0625f - 1e-5f;
}

__device__ __forceinline__ int mandel_count(float cx, float cy, int max_iter) {
    float zr = 0.0f, zi = 0.0f, zr2 = 0.0f, zi2 = 0.0f;
    int n = 0;
    // While |c| < 1.975, an orbit that has left |z| <= 2 grows every step (|z^2 + c| >= |z|^2 - |c| > |z|) until it
    // overflows to inf or NaN, which !(mag <= 4) also catches: an escape anywhere in a block is still seen at its
    // end. Closer to |c| = 2 the orbit can come back, so those few pixels (all escape within a step or two, or
    // lie on the real axis) take the checked loop throughout. The path test's own rounding does not matter.
    if (cx * cx + cy * cy < 3.9f) {
        while (n <= max_iter - MANDEL_UNROLL) {
            const float sr = zr, si = zi;
#pragma unroll
            for (int k = 0; k < MANDEL_UNROLL; ++k) mandel_step(zr, zi, zr2, zi2, cx, cy);
            if (!(__fadd_rn(zr2, zi2) <= 4.0f)) {  // escaped in this block: rewind and step singly below
                zr = sr;
                zi = si;
                zr2 = __fmul_rn(sr, sr);
                zi2 = __fmul_rn(si, si);
                break;
            }
            n += MANDEL_UNROLL;
        }
    }
    for (; n < max_iter; ++n) {
        if (__fadd_rn(zr2, zi2) > 4.0f) return n;
        mandel_step(zr, zi, zr2, zi2, cx, cy);
    }
    return max_iter;
}

// Block of 256 threads = 8 warps covering a 32 x 8 pixel tile; grid (ceil(width/32), ceil(height/8)).
extern "C" __global__ void __launch_bounds__(256)
mandelbrot_f32(int* __restrict__ out, int height, int width, float x0, float dx, float y0, float dy, int max_iter) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int col = blockIdx.x * 32 + (warp & 3) * 8 + (lane & 7);
    const int row = blockIdx.y * 8 + (warp >> 2) * 4 + (lane >> 3);
    if (row >= height || col >= width) return;
    const float cx = __fmaf_rn((float)col, dx, x0);
    const float cy = __fmaf_rn((float)row, dy, y0);
    out[(i64)row * width + col] = in_main_bulbs(cx, cy) ? max_iter : mandel_count(cx, cy, max_iter);
}

// The straightforward kernel, for comparison: one pixel per thread on 16 x 16 blocks, checked every step, written
// as plainly as numba_cuda.mandelbrot_naive (the compiler contracts it the same way: x and zi through one fma).
extern "C" __global__ void mandelbrot_naive_f32(int* out, int height, int width, float x0, float dx, float y0,
                                                float dy, int max_iter) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= height || col >= width) return;
    const float x = x0 + (float)col * dx;
    const float y = y0 + (float)row * dy;
    float zr = 0.0f, zi = 0.0f;
    int n = max_iter;
    for (int i = 0; i < max_iter; ++i) {
        const float zr2 = zr * zr, zi2 = zi * zi;
        if (zr2 + zi2 > 4.0f) {
            n = i;
            break;
        }
        zi = 2.0f * zr * zi + y;
        zr = zr2 - zi2 + x;
    }
    out[(i64)row * width + col] = n;
}
