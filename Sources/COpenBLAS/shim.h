#ifndef COPENBLAS_SHIM_H
#define COPENBLAS_SHIM_H
// The CBLAS interface of OpenBLAS; the include path comes from pkg-config.
#include <cblas.h>
#endif
