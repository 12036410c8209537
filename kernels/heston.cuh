// Heston pricing arithmetic of kernels/heston.cu, __host__ __device__ so that a host compiler builds and tests
// it too (fp64). Normalised by the forward (F = 1, k = K / F); parameters (v0, theta, rho, kappa, eta); times
// in years. The "GL-20 recipe": a Black-Scholes control of total variance s (central differences of the
// characteristic function around -i) plus the correction integral over Gauss-Laguerre nodes x_j,
//   C = clamp(BS(k, s) + sum_j Re[c_j exp(-i x_j ln k)]),
//   c_j = W_j / pi (psi_BS(x_j - i) - psi_H(x_j - i)) / (x_j (x_j - i)).
//
// Layouts (member-last, quotes sorted by maturity): params [P][5]; times [M]; variance [M][P];
// factor_re, factor_im [M][J][P]; cosines, sines [J][Q] (cos and sin of x_j ln k); per-quote arrays [Q].
#pragma once

#ifndef __CUDACC__
#include <cmath>
#define __host__
#define __device__
#define __forceinline__ inline
using std::atan2; using std::copysign; using std::cos; using std::erfc; using std::exp; using std::fabs;
using std::fmax; using std::fmin; using std::hypot; using std::isfinite; using std::log; using std::sin;
using std::sqrt;
#endif

#define HESTON_EPSILON 0.01
#define HESTON_PI 3.141592653589793
#define HESTON_SQRT1_2 0.7071067811865476

struct Complex {
    double re, im;
};

__host__ __device__ __forceinline__ Complex operator+(Complex a, Complex b) { return {a.re + b.re, a.im + b.im}; }
__host__ __device__ __forceinline__ Complex operator-(Complex a, Complex b) { return {a.re - b.re, a.im - b.im}; }
__host__ __device__ __forceinline__ Complex operator*(Complex a, Complex b)
{
    return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
__host__ __device__ __forceinline__ Complex operator*(double a, Complex b) { return {a * b.re, a * b.im}; }
__host__ __device__ __forceinline__ Complex operator-(double a, Complex b) { return {a - b.re, -b.im}; }

// Smith's division: no overflow for large operands.
__host__ __device__ __forceinline__ Complex operator/(Complex a, Complex b)
{
    if (fabs(b.re) >= fabs(b.im)) {
        const double r = b.im / b.re, d = b.re + b.im * r;
        return {(a.re + a.im * r) / d, (a.im - a.re * r) / d};
    }
    const double r = b.re / b.im, d = b.im + b.re * r;
    return {(a.re * r + a.im) / d, (a.im * r - a.re) / d};
}

__host__ __device__ __forceinline__ Complex complex_exp(Complex z)
{
    const double m = exp(z.re);
    return {m * cos(z.im), m * sin(z.im)};
}

__host__ __device__ __forceinline__ Complex complex_log(Complex z)
{
    return {log(hypot(z.re, z.im)), atan2(z.im, z.re)};
}

// Principal square root (branch cut on the negative real axis, sign of the imaginary part kept).
__host__ __device__ __forceinline__ Complex complex_sqrt(Complex z)
{
    const double r = hypot(z.re, z.im);
    if (r == 0.0) return {0.0, z.im};
    if (z.re >= 0.0) {
        const double t = sqrt(0.5 * (r + z.re));
        return {t, z.im / (2.0 * t)};
    }
    const double t = sqrt(0.5 * (r - z.re));
    return {fabs(z.im) / (2.0 * t), copysign(t, z.im)};
}

struct Heston {
    double v0, theta, rho, kappa, eta;
};

__host__ __device__ __forceinline__ Heston heston_member(const double* params, int p)
{
    const double* x = params + 5 * p;
    return {x[0], x[1], x[2], x[3], x[4]};
}

// Characteristic function of ln(S_t / F) at complex xi (the form without the branch-cut trap).
__host__ __device__ inline Complex heston_characteristic(Complex xi, double t, const Heston& h)
{
    const Complex i = {0.0, 1.0};
    const Complex d0 = Complex{h.kappa, 0.0} - (h.rho * h.eta) * (i * xi);
    const Complex d = complex_sqrt(d0 * d0 + (h.eta * h.eta) * (xi * (xi + i)));
    const Complex g = (d0 - d) / (d0 + d);
    const Complex e = complex_exp((-t) * d);
    const double eta2 = h.eta * h.eta;
    const Complex ge = 1.0 - g * e;
    const Complex exponent = (h.kappa * h.theta / eta2) * (t * (d0 - d) - 2.0 * complex_log(ge / (1.0 - g)))
                           + (h.v0 / eta2) * ((d0 - d) * (1.0 - e) / ge);
    return complex_exp(exponent);
}

#define HESTON_CONTROLS 4

// Point k where the characteristic function is evaluated for one (maturity, member): first the four
// central-difference points of the control variance around -i, then the quadrature's x_j - i.
__host__ __device__ inline Complex heston_point(int k, const double* nodes)
{
    const double e = HESTON_EPSILON;
    switch (k) {
    case 0: return {e, -1.0};
    case 1: return {-e, -1.0};
    case 2: return {0.0, e - 1.0};
    case 3: return {0.0, -1.0 - e};
    default: return {nodes[k - HESTON_CONTROLS], -1.0};
    }
}

// Total variance s of the Black-Scholes control variate from psi at the first HESTON_CONTROLS points.
__host__ __device__ inline double heston_control_variance(const Complex* psi)
{
    const Complex real_step = psi[0] - psi[1];
    const Complex imaginary_step = psi[2] - psi[3];
    // Im[real_step - i * imaginary_step] = real_step.im - imaginary_step.re
    return 0.5 * (real_step.im - imaginary_step.re) / HESTON_EPSILON;
}

// (psi_BS(x - i) - psi) / (x (x - i)) at real x > 0, with psi = psi_H(x - i).
__host__ __device__ inline Complex heston_correction(double x, double s, Complex psi)
{
    const Complex z = {x, -1.0};
    const Complex black = complex_exp((-0.5 * s) * (z * Complex{x, 0.0}));   // z (z + i) = (x - i) x
    return (black - psi) / (Complex{x, 0.0} * z);
}

__host__ __device__ __forceinline__ double normal_cdf(double x) { return 0.5 * erfc(-x * HESTON_SQRT1_2); }

// The clamped normalised call from its control variance s and correction integral; NaN when not finite.
__host__ __device__ inline double heston_call(double s, double integral, double log_strike, double strike)
{
    const double deviation = sqrt(s);
    const double d1 = (-log_strike + 0.5 * s) / deviation;
    const double raw = normal_cdf(d1) - strike * normal_cdf(d1 - deviation) + integral;
    if (!isfinite(raw)) return raw - raw;   // NaN
    return fmax(fmax(0.0, 1.0 - strike), fmin(1.0, raw));
}

// Calls of quote q for members p0 .. p0 + G - 1 (those < members; the others get 0): each table entry is
// read once and used for the G members.
template <int G>
__host__ __device__ inline void heston_quote_calls(int q, int p0, int members, int quotes, const int* term,
                                                   const double* variance, const double* factor_re,
                                                   const double* factor_im, int n_nodes, const double* cosines,
                                                   const double* sines, const double* log_strike,
                                                   const double* strike, double* calls)
{
    const int m = term[q];
    double integral[G];
    for (int g = 0; g < G; ++g) integral[g] = 0.0;
    for (int j = 0; j < n_nodes; ++j) {
        const double c = cosines[j * quotes + q], s = sines[j * quotes + q];
        const int row = (m * n_nodes + j) * members;
        for (int g = 0; g < G; ++g) {
            if (p0 + g < members) integral[g] += factor_re[row + p0 + g] * c + factor_im[row + p0 + g] * s;
        }
    }
    for (int g = 0; g < G; ++g) {
        const int p = p0 + g;
        calls[g] = p < members ? heston_call(variance[m * members + p], integral[g], log_strike[q], strike[q]) : 0.0;
    }
}

// Weighted squared vega-scaled errors w ((C - C_mkt) / vega)^2 of quote q for members p0 .. p0 + G - 1
// (NaN where the call is; 0 for members past the population).
template <int G>
__host__ __device__ inline void heston_quote_errors(int q, int p0, int members, int quotes, const int* term,
                                                    const double* variance, const double* factor_re,
                                                    const double* factor_im, int n_nodes, const double* cosines,
                                                    const double* sines, const double* log_strike,
                                                    const double* strike, const double* market,
                                                    const double* vega, const double* weight, double* errors)
{
    heston_quote_calls<G>(q, p0, members, quotes, term, variance, factor_re, factor_im, n_nodes, cosines, sines,
                          log_strike, strike, errors);
    for (int g = 0; g < G; ++g) {
        const double error = (errors[g] - market[q]) / vega[q];
        errors[g] = p0 + g < members ? weight[q] * error * error : 0.0;
    }
}
