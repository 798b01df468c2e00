/*
 * check_fast_div.c — the standalone check behind cg_kernel.c's fast_div:
 * f32 a / b as q = RN(a RN(1/b)), e = fma(-q, b, a), copysign(fma(e, r, q), q)
 * for the pairs its guard accepts (b and 1/b normal; a zero or
 * max(2^-100, 2^-124 |b|) <= |a| <= min(2^126 |b|, FLT_MAX)), bit for bit
 * against IEEE division. Prints pairs tried, accepted, mismatches; exit 1
 * on a mismatch. Needs hardware FMA:
 *   cc -O3 -march=native -ffp-contract=off scripts/check_fast_div.c -lm -o cfd
 *   ./cfd 1            every b significand in [1,2) x 256 random a (2^31 pairs)
 *   ./cfd 2 N          N random b (all bit patterns) x 64 random a
 *   ./cfd 3 B...       all 2^32 a for each b (hex bit patterns)
 *   ./cfd 4 N          N random b x 64 a near the guard's and the range's edges
 * Run before changing the guard: modes 1, 4 (4e7) and 3 (3f800000 3fffffff
 * 3f7fffff 40400000 7e7fffff 00800000 3faaaaab bf800001) found 0 mismatches
 * in 39 billion pairs.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static inline uint32_t fb(float x){uint32_t u;memcpy(&u,&x,4);return u;}
static inline float bf(uint32_t u){float x;memcpy(&x,&u,4);return x;}
typedef struct { float b, r; uint32_t lo, hi; int ok; } row;
static row mkrow(float b){
  row w; w.b=b; w.r=1.0f/b; float ab=fabsf(b);
  w.ok = ab >= 0x1p-126f && ab < 0x1p126f;
  float alo=fmaxf(0x1p-100f, 0x1p-124f*ab), ahi=fminf(0x1p126f*ab, 0x1.fffffep127f);
  w.lo=fb(alo); w.hi=fb(ahi);
  return w;
}
static uint64_t acc_n, bad_n, tot_n;
static inline void one(const row *w, float a){
  tot_n++;
  uint32_t m=fb(a)&0x7fffffffu;
  if(!w->ok || !(m==0 || (m>=w->lo && m<=w->hi))) return;
  acc_n++;
  float q=a*w->r, e=fmaf(-q,w->b,a), q2=fmaf(e,w->r,q), res=copysignf(q2,q);
  float want=a/w->b;
  if(fb(res)!=fb(want)){ if(bad_n++<10) printf("MISMATCH a=%a b=%a got %a want %a\n",a,w->b,res,want); }
}
static uint64_t st=88172645463325252ull;
static inline uint64_t rnd(void){st^=st<<13;st^=st>>7;st^=st<<17;return st;}
int main(int argc,char**argv){
  int mode=atoi(argv[1]);
  if(mode==1){ /* every b significand in [1,2) x 256 random a significands, random sign */
    for(uint32_t s=0;s<(1u<<23);s++){
      row w=mkrow(bf(0x3f800000u|s));
      for(int k=0;k<256;k++){ uint32_t ab=(uint32_t)rnd(); float a=bf((ab&0x807fffffu)|(0x3f800000u)); one(&w,a); }
    }
  } else if(mode==2){ /* random b, random a over all bit patterns */
    long n=atol(argv[2]);
    for(long i=0;i<n;i++){ row w=mkrow(bf((uint32_t)rnd())); for(int k=0;k<64;k++) one(&w,bf((uint32_t)rnd())); }
  } else if(mode==3){ /* exhaustive a (all 2^32 patterns) for given b bit patterns */
    for(int j=2;j<argc;j++){ row w=mkrow(bf((uint32_t)strtoul(argv[j],0,16))); for(uint64_t u=0;u<(1ull<<32);u++) one(&w,bf((uint32_t)u)); }
  } else if(mode==4){ /* random b of every exponent, a with exponents near the guard edges and result edges */
    long n=atol(argv[2]);
    for(long i=0;i<n;i++){
      uint32_t bu=(uint32_t)rnd(); row w=mkrow(bf(bu));
      if(!w.ok) continue;
      for(int k=0;k<64;k++){
        uint64_t r=rnd(); uint32_t base;
        switch(r&7){
        case 0: base=w.lo; break; case 1: base=w.hi; break;
        case 2: base=fb(0x1p-100f); break; case 3: base=fb(0x1p-126f*fabsf(w.b)); break;
        case 4: base=fb(0x1p-125f*fabsf(w.b)); break; case 5: base=fb(fminf(0x1p127f*fabsf(w.b),0x1.fffffep127f)); break;
        case 6: base=fb(fabsf(w.b)); break; default: base=(uint32_t)(r>>32)&0x7fffffffu; break;
        }
        int32_t d=(int32_t)((r>>8)&0xffffff)-0x800000; /* +-2^23 ulps around */
        uint32_t au=(uint32_t)((int64_t)base+d); if(au>0x7f800000u) au=base;
        one(&w,bf(au|((uint32_t)(r>>40)&0x80000000u)));
      }
    }
  }
  printf("mode %d: %llu pairs, %llu accepted, %llu mismatches\n",mode,(unsigned long long)tot_n,(unsigned long long)acc_n,(unsigned long long)bad_n);
  return bad_n!=0;
}
