// The extension module stoke._stoke: the Model class, the embed job and the
// verify check. The pure-Python package (python/src/stoke) gives them
// sentence-transformers' signatures; here are only the parts that need C++:
// the GIL released around every computation, signals polled between waits,
// and results handed to numpy without a copy.
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "pipeline/chunked_requests.h"
#include "errors.h"
#include "jobs.h"
#include "model.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoke::py {

namespace {

// The rows one call produced: numpy arrays are views of `values`, and this
// object is their owner (it lives as long as any of them).
struct RowBuffer {
  std::vector<float> values;
};

std::string type_name_of(nb::handle h) { return nb::type_name(h.type()).c_str(); }

// A Python str as UTF-8 bytes; anything else is the caller's mistake, named
// by its position.
std::string utf8_of(nb::handle h, const char* what, size_t index) {
  if (!PyUnicode_Check(h.ptr()))
    throw nb::type_error((std::string(what) + "[" + std::to_string(index) + "]: expected a str, got " + type_name_of(h))
                             .c_str());
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(h.ptr(), &size);
  if (!data) throw nb::python_error();  // lone surrogates: Python's own UnicodeEncodeError
  return std::string(data, static_cast<size_t>(size));
}

// texts: a list of str; or, with pairs allowed, of str or (str, str).
std::vector<BatchItem> items_of(nb::list texts, const char* what, bool pairs_allowed) {
  std::vector<BatchItem> items(texts.size());
  for (size_t i = 0; i < items.size(); ++i) {
    nb::handle h = texts[i];
    if (pairs_allowed && (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr()))) {
      nb::sequence pair = nb::borrow<nb::sequence>(h);
      if (nb::len(pair) != 2)
        throw nb::type_error((std::string(what) + "[" + std::to_string(i) +
                              "]: expected a str or a pair (str, str), got a sequence of " +
                              std::to_string(nb::len(pair)))
                                 .c_str());
      items[i].text = utf8_of(pair[0], what, i);
      items[i].pair = utf8_of(pair[1], what, i);
    } else {
      items[i].text = utf8_of(h, what, i);
    }
  }
  return items;
}

RowProduct product_of(const std::string& name) {
  if (name == "pooled") return RowProduct::pooled;
  if (name == "tokens") return RowProduct::tokens;
  if (name == "logits") return RowProduct::logits;
  throw Error(Errc::invalid_argument, "product \"" + name + "\": expected pooled, tokens or logits");
}

struct Collected {
  std::vector<float> values;
  int64_t width = 0;
  std::vector<int64_t> row_offsets;  // tokens only
  uint64_t tokens = 0;
  std::vector<TextExtras> extras;    // per text, when sparse / ColBERT outputs were asked
};

// Submits the items through the model's batcher in order, in chunks of a
// generation (embed's sort window: the same texts give embed's batches), and
// waits without the GIL, polling for signals between waits. A signal whose
// handler raises (Ctrl-C: KeyboardInterrupt) cancels what is not yet on the
// device, waits for the rest, and raises.
Collected run_requests(Model& model, std::vector<BatchItem> items, const BatchRequestOptions& ro,
                       const BatchShape& shape, nb::object on_progress) {
  using State = BatchRequest::State;
  const size_t kGeneration = RequestBatcherOptions{}.generation_texts;
  std::vector<std::shared_ptr<BatchRequest>> reqs;
  bool interrupted = false;
  size_t done_texts = 0;
  {
    nb::gil_scoped_release nogil;
    BatcherLease batcher = model.batcher(shape);
    size_t start = 0;
    do {  // an empty call still makes one (empty) request: it completes at once
      const size_t end = std::min(items.size(), start + kGeneration);
      std::vector<BatchItem> chunk(std::make_move_iterator(items.begin() + static_cast<ptrdiff_t>(start)),
                                   std::make_move_iterator(items.begin() + static_cast<ptrdiff_t>(end)));
      reqs.push_back(batcher->submit(std::move(chunk), ro));
      start = end;
    } while (start < items.size());
    for (size_t r = 0; r < reqs.size() && !interrupted; ++r) {
      while (reqs[r]->wait_for(std::chrono::milliseconds(50)) == State::queued) {
        nb::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) {
          interrupted = true;
          break;
        }
      }
      if (interrupted) break;
      if (!on_progress.is_none() && reqs[r]->state() == State::done) {
        done_texts += reqs[r]->token_counts.size();
        nb::gil_scoped_acquire gil;
        on_progress(done_texts);
      }
    }
    if (interrupted) {
      for (auto& r : reqs) r->cancel();
      for (auto& r : reqs) r->wait();
    }
  }
  if (interrupted) throw nb::python_error();  // the handler's exception, still set on this thread

  Collected out;
  for (auto& r : reqs) {
    if (r->state() == State::failed) std::rethrow_exception(r->error());
    if (r->state() != State::done) throw Error(Errc::internal, "an encode request ended cancelled");
  }
  out.width = reqs.empty() ? 0 : reqs.front()->width;
  if (reqs.size() == 1) {
    out.values = std::move(reqs[0]->values);
    out.row_offsets = std::move(reqs[0]->row_offsets);
    out.tokens = reqs[0]->total_tokens;
    out.extras = std::move(reqs[0]->extras);
    return out;
  }
  // More than one generation: the one copy that makes a single array.
  size_t total = 0;
  for (auto& r : reqs) total += r->values.size();
  out.values.reserve(total);
  for (auto& r : reqs) {
    const int64_t base = out.row_offsets.empty() ? 0 : out.row_offsets.back();
    if (ro.product == RowProduct::tokens) {
      for (size_t i = out.row_offsets.empty() ? 0 : 1; i < r->row_offsets.size(); ++i)
        out.row_offsets.push_back(base + r->row_offsets[i]);
    }
    out.values.insert(out.values.end(), r->values.begin(), r->values.end());
    out.tokens += r->total_tokens;
    out.extras.insert(out.extras.end(), std::make_move_iterator(r->extras.begin()),
                      std::make_move_iterator(r->extras.end()));
    std::vector<float>().swap(r->values);
  }
  return out;
}

// The rows as numpy arrays viewing one buffer (no copy): (n, width) for
// pooled and logits, a list of (len_i, H) for tokens. Returns (result, owner).
nb::tuple to_numpy(Collected c, RowProduct product, size_t texts) {
  auto* buf = new RowBuffer{std::move(c.values)};
  nb::object owner = nb::cast(buf, nb::rv_policy::take_ownership);
  float* data = buf->values.data();
  const size_t width = static_cast<size_t>(c.width);
  using Array = nb::ndarray<nb::numpy, float, nb::ndim<2>, nb::c_contig>;
  if (product != RowProduct::tokens) {
    Array arr(data, {texts, width}, owner);
    return nb::make_tuple(nb::cast(arr, nb::rv_policy::reference), owner);
  }
  nb::list list;
  for (size_t i = 0; i < texts; ++i) {
    const int64_t begin = c.row_offsets[i], end = c.row_offsets[i + 1];
    Array arr(data + begin * c.width, {static_cast<size_t>(end - begin), width}, owner);
    list.append(nb::cast(arr, nb::rv_policy::reference));
  }
  return nb::make_tuple(list, owner);
}

// A model with no dense vector (SPLADE, ColBERT) has no pooled rows to give.
void require_dense(const Model& model) {
  const TextOutputSources& src = model.output_sources();
  if (!src.dense)
    throw Error(Errc::invalid_argument,
                "this model has no dense vector: it is a " +
                    std::string(src.sparse != SparseSource::none ? "sparse encoder (SPLADE): encode(..., output=\"sparse\")"
                                                                 : "ColBERT model: encode(..., output=\"colbert\")"));
}

nb::tuple encode(Model& model, nb::list texts, const std::string& product, const std::string& prompt,
                 int64_t batch_tokens, int64_t batch_size, nb::object on_progress) {
  BatchRequestOptions ro;
  ro.product = product_of(product);
  ro.prompt = prompt;
  if (ro.product == RowProduct::pooled) require_dense(model);
  if (ro.product == RowProduct::logits && !model.has_classifier())
    throw Error(Errc::invalid_argument, "predict: " + model.architecture() +
                                            " has no classification head (config.json architectures names no "
                                            "*ForSequenceClassification); use encode");
  const size_t n = texts.size();
  std::vector<BatchItem> items = items_of(texts, "sentences", ro.product == RowProduct::logits);
  Collected c = run_requests(model, std::move(items), ro, BatchShape{batch_tokens, batch_size}, on_progress);
  if (n == 0) {
    c.width = ro.product == RowProduct::logits ? static_cast<int64_t>(model.session().encoder.config.num_labels())
              : ro.product == RowProduct::tokens ? model.hidden_size()
                                                   : model.dimension();
    c.row_offsets = {0};
  }
  return to_numpy(std::move(c), ro.product, n);
}

// Sparse and ColBERT outputs laid out for numpy: CSR arrays (indptr,
// indices, values) and the ColBERT vectors of every text one after another
// (total, dim) with offsets (texts + 1) — each text's array a view.
struct ExtrasBuffer {
  std::vector<int64_t> indptr{0}, colbert_offsets{0};
  std::vector<int32_t> indices;
  std::vector<float> values, colbert;
};

TextRole role_of(const std::string& role) {
  if (role == "query") return TextRole::query;
  if (role == "document") return TextRole::document;
  throw Error(Errc::invalid_argument, "role \"" + role + "\": expected \"query\" or \"document\"");
}

// Model.encode(output="sparse" | "colbert") and Model.encode_outputs: one
// forward per batch gives every output asked. Returns (dense or None,
// indptr, indices, values, colbert (total, dim), colbert_offsets, owner);
// arrays not asked are empty.
nb::tuple encode_outputs(Model& model, nb::list texts, const std::string& prompt, bool dense, bool sparse,
                         bool colbert, const std::string& role, int64_t sparse_top_k, int64_t batch_tokens,
                         int64_t batch_size, nb::object on_progress) {
  const TextOutputSources& src = model.output_sources();
  if (dense) require_dense(model);
  if (sparse_top_k < 0) throw Error(Errc::invalid_argument, "sparse_top_k: expected 0 (all) or more");
  BatchRequestOptions ro;
  ro.product = RowProduct::pooled;
  ro.prompt = prompt;
  ro.extras = model.output_settings(sparse, colbert, role_of(role), sparse_top_k);
  const size_t n = texts.size();
  Collected c = run_requests(model, items_of(texts, "sentences", false), ro, BatchShape{batch_tokens, batch_size},
                             on_progress);
  auto* buf = new ExtrasBuffer;
  nb::object owner = nb::cast(buf, nb::rv_policy::take_ownership);
  auto* rows = new RowBuffer{std::move(c.values)};
  nb::object rows_owner = nb::cast(rows, nb::rv_policy::take_ownership);
  for (const TextExtras& x : c.extras) {
    buf->indices.insert(buf->indices.end(), x.sparse.ids.begin(), x.sparse.ids.end());
    buf->values.insert(buf->values.end(), x.sparse.weights.begin(), x.sparse.weights.end());
    buf->indptr.push_back(static_cast<int64_t>(buf->indices.size()));
    buf->colbert.insert(buf->colbert.end(), x.colbert.begin(), x.colbert.end());
    buf->colbert_offsets.push_back(src.colbert_dim > 0 ? static_cast<int64_t>(buf->colbert.size()) / src.colbert_dim : 0);
  }
  std::vector<TextExtras>().swap(c.extras);
  if (!sparse) buf->indptr.assign(1, 0);
  if (!colbert) buf->colbert_offsets.assign(1, 0);
  using F2 = nb::ndarray<nb::numpy, float, nb::ndim<2>, nb::c_contig>;
  using F1 = nb::ndarray<nb::numpy, float, nb::ndim<1>, nb::c_contig>;
  using I1 = nb::ndarray<nb::numpy, int32_t, nb::ndim<1>, nb::c_contig>;
  using L1 = nb::ndarray<nb::numpy, int64_t, nb::ndim<1>, nb::c_contig>;
  nb::object dense_out = nb::none();
  if (dense) dense_out = nb::cast(F2(rows->values.data(), {n, static_cast<size_t>(model.dimension())}, rows_owner),
                                  nb::rv_policy::reference);
  const auto D = static_cast<size_t>(std::max<int64_t>(src.colbert_dim, 1));
  return nb::make_tuple(
      dense_out, nb::cast(L1(buf->indptr.data(), {buf->indptr.size()}, owner), nb::rv_policy::reference),
      nb::cast(I1(buf->indices.data(), {buf->indices.size()}, owner), nb::rv_policy::reference),
      nb::cast(F1(buf->values.data(), {buf->values.size()}, owner), nb::rv_policy::reference),
      nb::cast(F2(buf->colbert.data(), {buf->colbert.size() / D, D}, owner), nb::rv_policy::reference),
      nb::cast(L1(buf->colbert_offsets.data(), {buf->colbert_offsets.size()}, owner), nb::rv_policy::reference),
      nb::make_tuple(owner, rows_owner));
}

// Model.encode(chunk_tokens=...): the texts cut as `stoke embed
// --chunk-tokens` cuts them, sent as ids through the batcher, and the rows
// with their spans: (rows (n, width) f32, spans (n, 9) int64 — text, chunk,
// chunks, then token, byte and character [begin, end) — , owner).
nb::tuple encode_chunks(Model& model, nb::list texts, const std::string& prompt, int64_t chunk_tokens,
                        int64_t chunk_overlap, const std::string& boundary, bool late, const std::string& pool,
                        int64_t batch_tokens, int64_t batch_size, nb::object on_progress) {
  ChunkOptions o;
  o.settings.tokens = chunk_tokens;
  o.settings.overlap = chunk_overlap;
  const auto b = chunk_boundary_from_name(boundary);
  if (!b) throw Error(Errc::invalid_argument, "chunk_boundary \"" + boundary + "\": expected " + kChunkBoundaryWords);
  o.settings.boundary = *b;
  o.late = late;
  const auto p = chunk_pooling_from_name(pool);
  if (!p) throw Error(Errc::invalid_argument, "pool_chunks \"" + pool + "\": expected " + kChunkPoolingWords);
  o.pool = *p;
  std::vector<BatchItem> given = items_of(texts, "sentences", false);
  std::vector<std::string> strings;
  strings.reserve(given.size());
  for (BatchItem& it : given) strings.push_back(std::move(it.text));
  const ModelSession& s = model.session();
  ChunkedItems chunked;
  {
    nb::gil_scoped_release nogil;
    chunked = chunk_items(*s.text.tokenizer, s.encoder, model.pooling(), strings, o, prompt,
                          static_cast<size_t>(model.max_length()));
  }
  BatchRequestOptions ro;
  ro.product = chunked.product;
  std::vector<BatchItem> items = std::move(chunked.items);
  chunked.items.clear();
  Collected c = run_requests(model, std::move(items), ro, BatchShape{batch_tokens, batch_size}, on_progress);
  if (chunked.rows.empty()) c.width = ro.product == RowProduct::tokens ? model.hidden_size() : model.dimension();
  ChunkedRows rows = chunk_rows(chunked, c.values, c.width, c.row_offsets, model.normalize());
  const size_t n = rows.rows.size();
  auto* spans = new std::vector<int64_t>(n * 9);
  for (size_t r = 0; r < n; ++r) {
    const ChunkRow& row = rows.rows[r];
    const int64_t v[9] = {rows.row_text[r],
                          row.pooled ? 0 : row.index,
                          row.count,
                          row.span.token_begin,
                          row.span.token_end,
                          static_cast<int64_t>(row.span.byte_begin),
                          static_cast<int64_t>(row.span.byte_end),
                          static_cast<int64_t>(row.span.char_begin),
                          static_cast<int64_t>(row.span.char_end)};
    std::copy(v, v + 9, spans->begin() + static_cast<std::ptrdiff_t>(r * 9));
  }
  nb::capsule spans_owner(spans, [](void* p) noexcept { delete static_cast<std::vector<int64_t>*>(p); });
  using Spans = nb::ndarray<nb::numpy, int64_t, nb::ndim<2>, nb::c_contig>;
  Collected out;
  out.values = std::move(rows.values);
  out.width = rows.width;
  nb::tuple arr = to_numpy(std::move(out), RowProduct::pooled, n);
  return nb::make_tuple(arr[0], nb::cast(Spans(spans->data(), {n, size_t{9}}, spans_owner), nb::rv_policy::reference),
                        arr[1]);
}

nb::dict tokenize(const Model& model, nb::list texts) {
  std::vector<BatchItem> items = items_of(texts, "texts", true);
  std::vector<Encoding> enc;
  {
    nb::gil_scoped_release nogil;
    enc = model.tokenize(items);
  }
  size_t longest = 0;
  for (const auto& e : enc) longest = std::max(longest, e.ids.size());
  const size_t n = enc.size();
  auto* ids = new std::vector<int64_t>(n * longest, model.session().text.tokenizer->pad_id());
  auto* mask = new std::vector<int64_t>(n * longest, 0);
  auto* types = new std::vector<int64_t>(n * longest, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t t = 0; t < enc[i].ids.size(); ++t) {
      (*ids)[i * longest + t] = enc[i].ids[t];
      (*mask)[i * longest + t] = 1;
      (*types)[i * longest + t] = t < enc[i].type_ids.size() ? enc[i].type_ids[t] : 0;
    }
  }
  using Array = nb::ndarray<nb::numpy, int64_t, nb::ndim<2>, nb::c_contig>;
  auto wrap = [&](std::vector<int64_t>* v) {
    nb::capsule owner(v, [](void* p) noexcept { delete static_cast<std::vector<int64_t>*>(p); });
    return nb::cast(Array(v->data(), {n, longest}, owner), nb::rv_policy::reference);
  };
  nb::dict out;
  out["input_ids"] = wrap(ids);
  out["attention_mask"] = wrap(mask);
  out["token_type_ids"] = wrap(types);
  return out;
}

}  // namespace

}  // namespace stoke::py

NB_MODULE(_stoke, m) {
  using namespace stoke::py;
  m.doc() = "stoke's engine (the C++ library); use the `stoke` package, which wraps it.";
  register_errors(m);

  nb::class_<RowBuffer>(m, "RowBuffer",
                        "The buffer stoke filled with one call's rows; the arrays of that call are views of it.")
      .def_prop_ro("address", [](const RowBuffer& b) { return reinterpret_cast<uintptr_t>(b.values.data()); })
      .def_prop_ro("nbytes", [](const RowBuffer& b) { return b.values.size() * sizeof(float); });

  nb::class_<ExtrasBuffer>(m, "ExtrasBuffer", "The buffer of one call's sparse and ColBERT outputs.");

  nb::class_<Model>(m, "Model")
      .def(
          "__init__",
          [](Model* self, const std::string& path, const std::string& device, const std::string& dtype,
             std::optional<int64_t> max_length, std::optional<int> workers) {
            ModelOptions o{path, device, dtype, max_length, workers};
            nb::gil_scoped_release nogil;
            new (self) Model(o);
          },
          "path"_a, "device"_a = "auto", "dtype"_a = "f32", "max_length"_a = nb::none(), "workers"_a = nb::none())
      .def_prop_ro("dimension", &Model::dimension)
      .def_prop_ro("hidden_size", &Model::hidden_size)
      .def_prop_ro("max_length", &Model::max_length)
      .def_prop_ro("architecture", &Model::architecture)
      .def_prop_ro("pooling", &Model::pooling_name)
      .def_prop_ro("normalize", &Model::normalize)
      .def_prop_ro("device", &Model::device)
      .def_prop_ro("dtype", &Model::dtype)
      .def_prop_ro("workers", &Model::workers)
      .def_prop_ro("has_classifier", &Model::has_classifier)
      .def_prop_ro("prompts", [](const Model& m) { return m.st().prompts; })
      .def_prop_ro("default_prompt_name", [](const Model& m) { return m.st().default_prompt_name; })
      .def_prop_ro("labels", [](const Model& m) { return m.session().encoder.config.id2label; })
      .def_prop_ro("problem_type",
                   [](const Model& m) {
                     return std::string(stoke::problem_type_name(m.session().encoder.config.problem_type));
                   })
      .def("resolve_prompt", &Model::resolve_prompt, "prompt"_a = nb::none(), "prompt_name"_a = nb::none())
      .def("encode", &encode, "texts"_a, "product"_a = "pooled", "prompt"_a = "", "batch_tokens"_a = 16384,
           "batch_size"_a = 256, "on_progress"_a = nb::none())
      .def("encode_chunks", &encode_chunks, "texts"_a, "prompt"_a, "chunk_tokens"_a, "chunk_overlap"_a = 0,
           "chunk_boundary"_a = "none", "late_chunking"_a = false, "pool_chunks"_a = "none",
           "batch_tokens"_a = 16384, "batch_size"_a = 256, "on_progress"_a = nb::none())
      .def("encode_outputs", &encode_outputs, "texts"_a, "prompt"_a, "dense"_a, "sparse"_a, "colbert"_a,
           "role"_a = "document", "sparse_top_k"_a = 0, "batch_tokens"_a = 16384, "batch_size"_a = 256,
           "on_progress"_a = nb::none())
      .def_prop_ro("outputs",
                   [](const Model& m) {
                     const stoke::TextOutputSources& s = m.output_sources();
                     nb::dict d;
                     d["dense"] = s.dense;
                     d["sparse"] = std::string(stoke::sparse_source_name(s.sparse));
                     d["multi_vector"] = std::string(stoke::multi_vector_source_name(s.multi_vector));
                     d["colbert_dim"] = s.colbert_dim;
                     d["sparse_columns"] = s.sparse_columns;
                     return d;
                   })
      .def("tokenize", &tokenize, "texts"_a);

  register_jobs(m);
}
