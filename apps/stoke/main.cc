#include <cstdio>
int main() { std::puts("stoke"); return 0; }
