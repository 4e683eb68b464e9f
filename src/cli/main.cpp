#include <iostream>

int main() {
  std::cout << "kforge: under construction\n";
  return 0;
}
