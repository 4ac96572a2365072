"""Builds the tokenizer golden folders and their expected ids.

Run from the repository root with the pinned oracle environment:

    python tests/golden/tokenizers/make_goldens.py [FIXTURES_DIR]

FIXTURES_DIR defaults to ../shared/fixtures (relative to the repository root).
Pinned versions (the only ones these goldens were made with):
    transformers==5.24.0, tokenizers==0.23.3, sentencepiece (for the XLM-R
    SentencePiece model), Python 3.11.

Every id in the outputs comes from transformers' tokenizers (the Rust
`tokenizers` backend, as transformers 5 loads them); stoke is not used.

Each folder under tests/golden/tokenizers/<name>/ is what save_pretrained of
the matching transformers tokenizer class writes (plus, for the awkward cases,
the hand-made file the case is about).  Large files that already exist in the
shared fixtures (the XLM-R sentencepiece.bpe.model) are not copied: the
expected file lists them under "fixture_files" and the tests copy them in.

cases.jsonl holds every text (and pair) once: {"text": ..., "pair": ...}.
<name>.expected.jsonl holds a first line {"meta": {...}} and then one line per case:
    {"case": <line number in cases.jsonl, 0-based>, "ids": [...]}
with special tokens and without truncation.
"""

import json
import os
import shutil
import sys
import tempfile

from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers, decoders
import transformers
from transformers import (
    BertTokenizer,
    CamembertTokenizer,
    DistilBertTokenizer,
    ElectraTokenizer,
    MPNetTokenizer,
    Qwen2Tokenizer,
    RobertaTokenizer,
    XLMRobertaTokenizer,
)

assert transformers.__version__ == "5.24.0", transformers.__version__

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FIXTURES = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "fixtures")
TINY_BERT = os.path.join(FIXTURES, "models", "tiny-bert")
TINY_XLMR = os.path.join(FIXTURES, "models", "tiny-xlmr")


def golden_texts():
    with open(os.path.join(FIXTURES, "golden", "texts.jsonl"), encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def corpus_texts(limit):
    out = []
    with open(os.path.join(FIXTURES, "corpus", "fortunes-multilingual.jsonl"), encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line)["text"])
    # A deterministic spread over the languages (the file is grouped by nothing in particular).
    step = max(1, len(out) // limit)
    return out[::step][:limit]


AWKWARD = [
    "",
    " ",
    "   \t\n  ",
    "<s>",
    "<s> hello </s>",
    "a<mask>b",
    "a <mask> b",
    "hello <mask>",
    "[CLS] hello [SEP] world [MASK]",
    "<pad><unk></s>",
    "Hello WORLD hello world",
    "HELLO, World! It's a test; isn't it? We'll see, they've said I'd go.",
    "naïve café résumé Ångström",
    "e\u0301 a\u0300 o\u0308\u0304 \u0915\u094d\u0937",
    "😀 👍🏽 👨‍👩‍👧 🇩🇪",
    "東京は日本の首都です。北京欢迎你",
    "Ｆｕｌｌｗｉｄｔｈ ｔｅｘｔ １２３",
    "ﬁ ﬂ ① ½ ㎏ Ⅳ",
    "tab\tseparated\ttext and  double  spaces",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
    "     leading and trailing     ",
    "numbers 1234567 3.14159 1,000,000 ٣٤٥",
    "\u00a0nbsp\u00a0inside\u2003em space\u3000ideographic",
    "zero\u200bwidth\u200djoiner",
    "line\nbreaks\r\nand\rcarriage",
    "'s 't 're 've 'm 'll 'd ''quoted''",
    "x" * 300,
    "😀" * 60,
]

PAIRS = [(0, 1), (2, 3), (40, 41), (5, 50), (64, 65)]


CASES = []  # every (text, pair) once, in order; cases.jsonl
CASE_INDEX = {}


def case_id(text, pair=None):
    key = (text, pair)
    if key not in CASE_INDEX:
        CASE_INDEX[key] = len(CASES)
        CASES.append({"text": text} if pair is None else {"text": text, "pair": pair})
    return CASE_INDEX[key]


def cases_for(tok, texts, extra):
    cases = []
    all_texts = texts + AWKWARD
    for t in all_texts + extra:
        cases.append({"case": case_id(t), "ids": tok(t)["input_ids"]})
    for a, b in PAIRS:
        ta, tb = all_texts[a % len(all_texts)], all_texts[b % len(all_texts)]
        cases.append({"case": case_id(ta, tb), "ids": tok(ta, tb)["input_ids"]})
    return cases


def write_expected(name, cases, meta):
    # Files byte-identical to a shared fixture are not kept twice: the tests copy them in.
    for fname, rel in meta.get("fixture_files", {}).items():
        mine = os.path.join(HERE, name, fname)
        if os.path.exists(mine):
            with open(mine, "rb") as a, open(os.path.join(FIXTURES, rel), "rb") as b:
                assert a.read() == b.read(), (name, fname)
            os.remove(mine)
    with open(os.path.join(HERE, name + ".expected.jsonl"), "w", encoding="utf-8") as f:
        f.write(json.dumps({"meta": meta}, ensure_ascii=False) + "\n")
        for c in cases:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")


def write_cases():
    with open(os.path.join(HERE, "cases.jsonl"), "w", encoding="utf-8") as f:
        for c in CASES:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")


def fresh(name):
    d = os.path.join(HERE, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    return d


def save(tok, name):
    d = fresh(name)
    tok.save_pretrained(d)
    return d


def main():
    texts = golden_texts()
    train = corpus_texts(3000)

    # ---- XLM-R as transformers 5 saves it: tokenizer.json (Unigram + Precompiled)
    # with tokens added after training (they live only in tokenizer.json).
    xlmr = XLMRobertaTokenizer.from_pretrained(TINY_XLMR)
    xlmr.add_tokens(["<ent>", "Zürich-AG", AddedToken("stoke", single_word=True, normalized=False)])
    xlmr.add_tokens([AddedToken("Straße", normalized=True)])
    xlmr.add_special_tokens({"additional_special_tokens": ["<sep2>"]})
    d = save(xlmr, "xlmr-added")
    extra = ["an <ent> here", "x<ent>y", "Zürich-AG und zürich-ag", "stoke stoked restoke stoke.", "<sep2>a<sep2>",
             "STRASSE Straße straße", "<ent><mask> <s>"]
    tok = XLMRobertaTokenizer.from_pretrained(d)
    write_expected("xlmr-added", cases_for(tok, texts, extra),
                   {"class": "XLMRobertaTokenizer", "fixture_files": {}, "extra_count": len(extra)})
    # The same ids must come when the folder also holds sentencepiece.bpe.model
    # (the SentencePiece model cannot know the added tokens).

    # ---- XLM-R, sentencepiece.bpe.model only, added tokens in tokenizer_config.json.
    d = fresh("xlmr-spm-added")
    with open(os.path.join(TINY_XLMR, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["added_tokens_decoder"] = {
        "4002": {"content": "<ent>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                 "special": False},
        "4003": {"content": "<sep2>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                 "special": True},
    }
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
    tmp = tempfile.mkdtemp()
    shutil.copy(os.path.join(d, "tokenizer_config.json"), tmp)
    shutil.copy(os.path.join(TINY_XLMR, "sentencepiece.bpe.model"), tmp)
    tok = XLMRobertaTokenizer.from_pretrained(tmp)
    extra = ["an <ent> here", "x<ent>y", "<sep2>a<sep2>"]
    write_expected("xlmr-spm-added", cases_for(tok, texts, extra),
                   {"class": "XLMRobertaTokenizer",
                    "fixture_files": {"sentencepiece.bpe.model": "models/tiny-xlmr/sentencepiece.bpe.model"},
                    "extra_count": len(extra)})

    # ---- CamemBERT: a Unigram trained by tokenizers' UnigramTrainer.
    uni = Tokenizer(models.Unigram())
    uni.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace("``", '"')])
    uni.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=1500, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                      unk_token="<unk>", max_piece_length=12, shrinking_factor=0.75, n_sub_iterations=2)
    # Without the Chinese texts: the CJK characters stay out of the vocabulary
    # (unknown runs, fused into one <unk>, are part of what is tested).
    uni.train_from_iterator([t for t in train if not any("\u4e00" <= c <= "\u9fff" for c in t)], trainer=trainer)
    vocab = json.loads(uni.to_str())["model"]["vocab"]
    cam = CamembertTokenizer(vocab=[(p, s) for p, s in vocab])
    d = save(cam, "camembert")
    tok = CamembertTokenizer.from_pretrained(d)
    extra = ["J'ai vu ``quelque chose'' <mask> là-bas.", "unknownΩ≈ç√∫˜µ≤≥÷ chars"]
    write_expected("camembert", cases_for(tok, texts, extra), {"class": "CamembertTokenizer", "fixture_files": {},
                                                               "extra_count": len(extra)})

    # ---- RoBERTa: ByteLevel BPE trained by tokenizers' BpeTrainer.
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(train, trainer=trainer)
    model = json.loads(bpe.to_str())["model"]
    vocab, merges = model["vocab"], model["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    rob = RobertaTokenizer(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges])
    d = save(rob, "roberta")
    tok = RobertaTokenizer.from_pretrained(d)
    extra = ["Hello world", " Hello  world ", "it's   ok\n\n\nyes"]
    write_expected("roberta", cases_for(tok, texts, extra), {"class": "RobertaTokenizer", "fixture_files": {},
                                                             "extra_count": len(extra)})

    # ---- RoBERTa from vocab.json + merges.txt (no tokenizer.json).
    d = fresh("roberta-vocab-merges")
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in merges:
            f.write(m + "\n")
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "RobertaTokenizer", "model_max_length": 512}, f, indent=2)
    tok = RobertaTokenizer.from_pretrained(d)
    write_expected("roberta-vocab-merges", cases_for(tok, texts, extra),
                   {"class": "RobertaTokenizer", "fixture_files": {}, "extra_count": len(extra)})

    # ---- WordPiece families from the tiny BERT vocabulary.
    vocab_txt = os.path.join(TINY_BERT, "vocab.txt")
    for name, cls, kwargs in [
        ("distilbert", DistilBertTokenizer, {}),
        ("electra", ElectraTokenizer, {}),
        ("mpnet", MPNetTokenizer, {"unk_token": "[UNK]"}),
    ]:
        t = cls(vocab=vocab_txt, **kwargs)
        d = save(t, name)
        tok = cls.from_pretrained(d)
        write_expected(name, cases_for(tok, texts, []),
                       {"class": cls.__name__, "fixture_files": {"tokenizer.json": "models/tiny-bert/tokenizer.json"}
                        if name != "mpnet" else {}, "extra_count": 0})

    # ---- BERT uncased with an added token "Quixotic" (normalized: true).
    bert = BertTokenizer.from_pretrained(TINY_BERT)
    bert.add_tokens([AddedToken("Quixotic", normalized=True), AddedToken("<Raw>", normalized=False)])
    d = save(bert, "bert-normalized-added")
    tok = BertTokenizer.from_pretrained(d)
    extra = ["QUIXOTIC quixotic Quixotic QuIxOtIc", "a quixoticb", "<Raw> <raw> <RAW>"]
    write_expected("bert-normalized-added", cases_for(tok, texts, extra),
                   {"class": "BertTokenizer", "fixture_files": {}, "extra_count": len(extra)})

    # ---- BERT whose tokenizer.json lowercases while tokenizer_config.json says
    # do_lower_case false: transformers follows tokenizer_config.json.  Refused by stoke.
    bert = BertTokenizer.from_pretrained(TINY_BERT)
    d = save(bert, "bert-lowercase-conflict")
    p = os.path.join(d, "tokenizer_config.json")
    with open(p, encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["do_lower_case"] = False
    with open(p, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
    tok = BertTokenizer.from_pretrained(d)
    write_expected("bert-lowercase-conflict", cases_for(tok, texts[:4], ["Hello WORLD"]),
                   {"class": "BertTokenizer", "fixture_files": {"tokenizer.json": "models/tiny-bert/tokenizer.json"},
                    "extra_count": 1,
                    "note": "what transformers gives; stoke refuses this folder"})
    # ---- Qwen3-Embedding: Qwen2Tokenizer (NFC, Split with Qwen2's regex, ByteLevel
    # without its own regex, byte-level BPE), with the TemplateProcessing
    # post-processor Qwen3-Embedding's tokenizer.json carries: "$A <|endoftext|>".
    qwen_regex = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(qwen_regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=1500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    bpe.train_from_iterator(train, trainer=trainer)
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    qwen = Qwen2Tokenizer(vocab=model["vocab"], merges=merges)
    qwen.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    d = save(qwen, "qwen3")
    p = os.path.join(d, "tokenizer.json")
    with open(p, encoding="utf-8") as f:
        tj = json.load(f)
    eos = qwen.convert_tokens_to_ids("<|endoftext|>")
    template = Tokenizer(models.BPE())
    template.post_processor = processors.TemplateProcessing(
        single="$A:0 <|endoftext|>:0", pair="$A:0 <|endoftext|>:0 $B:1 <|endoftext|>:1",
        special_tokens=[("<|endoftext|>", eos)])
    tj["post_processor"] = json.loads(template.to_str())["post_processor"]
    with open(p, "w", encoding="utf-8") as f:
        json.dump(tj, f, indent=2, ensure_ascii=False)
    tok = Qwen2Tokenizer.from_pretrained(d)
    assert tok("a")["input_ids"][-1] == eos, "the template must append <|endoftext|>"
    extra = ["it's IT'S It'Ll we'VE 'ſ", "a\n\n  b\r\n\tc", "x  \t\ny  ", "(hello) [world] {x}!!\n\nnext",
             "<|endoftext|> in text<|im_start|>user\nhi<|im_end|>", "Instruct: Given a query\nQuery: what?",
             "12345 ٣٤٥ ½", "  \n", "a 1 b  2"]
    write_expected("qwen3", cases_for(tok, texts, extra), {"class": "Qwen2Tokenizer", "fixture_files": {},
                                                           "extra_count": len(extra)})
    write_cases()


if __name__ == "__main__":
    main()
