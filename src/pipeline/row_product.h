// What a text becomes: the rows the encode pipeline (stoke embed, classify)
// and the request batcher (stoke serve, the Python package) hand back. One
// vocabulary for both; the encode pipeline makes pooled and logits rows only
// and refuses tokens where its options are read (pipeline_row_width).
#pragma once

namespace stoke {

enum class RowProduct {
  pooled,  // one row per text: the model's pooling, Dense modules and Normalize (sentence width)
  tokens,  // the last hidden state: len_i rows of H per text (special tokens included)
  logits,  // one row of num_labels per text (classifiers, cross-encoders)
};

}  // namespace stoke
