#include <stdlib.h>
int main(int c, char **v){ volatile unsigned long n=0; int p = c>1 && v[1][0]=='p';
 for(;;){ n++; if(p) __builtin_ia32_pause(); } }
