#include "core/sha256.h"

#include <openssl/evp.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace stoke {

// One EVP digest context per hash; errors from libcrypto are internal (the
// only failure modes are allocation and a missing SHA-256, neither expected).
struct Sha256::State {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  if (!state_->ctx || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1)
    throw Error(Errc::internal, "libcrypto: cannot start a SHA-256 digest");
}
Sha256::~Sha256() = default;
Sha256::Sha256(const Sha256& other) : state_(std::make_unique<State>()) {
  if (!state_->ctx || EVP_MD_CTX_copy_ex(state_->ctx, other.state_->ctx) != 1)
    throw Error(Errc::internal, "libcrypto: cannot copy a SHA-256 digest");
}
Sha256& Sha256::operator=(const Sha256& other) {
  if (this != &other) *this = Sha256(other);
  return *this;
}
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, size_t bytes) {
  if (bytes == 0) return;
  if (EVP_DigestUpdate(state_->ctx, data, bytes) != 1) throw Error(Errc::internal, "libcrypto: SHA-256 update failed");
}

std::array<uint8_t, 32> Sha256::digest() {
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(state_->ctx, out.data(), &len) != 1 || len != out.size())
    throw Error(Errc::internal, "libcrypto: SHA-256 final failed");
  return out;
}

std::string Sha256::hex_digest() {
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (uint8_t b : digest()) {
    s.push_back(hex[b >> 4]);
    s.push_back(hex[b & 15]);
  }
  return s;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex_digest();
}

std::string sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, path.string() + ": cannot open for checksum");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(Errc::io, path.string() + ": read failed during checksum");
  return h.hex_digest();
}

}  // namespace stoke
