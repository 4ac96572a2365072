// The five ways stoke pools a sequence's token rows into one vector: what a
// sentence-transformers Pooling module names (io reads it), what `--pooling`
// and the server ask for (jobs, serve), and what the backend's pool op
// computes (backend/op_list.h). One vocabulary for all of them, in the lowest
// layer, so a mode read from a file reaches the kernel without a translation.
#pragma once

#include <optional>
#include <string_view>

namespace stoke {

enum class Pooling { cls, mean, max, mean_sqrt_len, lasttoken };

// Every mode, in declaration order.
inline constexpr Pooling kPoolings[] = {Pooling::cls, Pooling::mean, Pooling::max, Pooling::mean_sqrt_len,
                                        Pooling::lasttoken};

// stoke's name: "cls", "mean", "max", "mean_sqrt_len", "lasttoken".
std::string_view pooling_name(Pooling p);
// sentence-transformers' spelling, as in its legacy 1_Pooling/config.json
// flags pooling_mode_<name>: "cls_token", "mean_tokens", "max_tokens",
// "mean_sqrt_len_tokens", "lasttoken".
std::string_view pooling_flag_name(Pooling p);
// Accepts either spelling, exactly (case matters); nullopt for anything else.
std::optional<Pooling> pooling_from_name(std::string_view name);

}  // namespace stoke
