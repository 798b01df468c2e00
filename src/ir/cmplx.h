/*
 * cmplx.h — CMPLX(re, im) where <complex.h> lacks it (glibc defines it for
 * gcc only): the reference evaluator and the complex tests build values
 * from their parts with it.
 */
#ifndef RLX_IR_CMPLX_H
#define RLX_IR_CMPLX_H

#include <complex.h>

#ifndef CMPLX /* the parts as the C11 layout, an array of two */
static inline double complex cmplx_parts(double re, double im)
{
    union {
        double complex z;
        double p[2];
    } u = {.p = {re, im}};
    return u.z;
}
#define CMPLX(re, im) cmplx_parts((re), (im))
#endif

#endif
