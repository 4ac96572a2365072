// RecordReader: every format's records, numbers and line numbers; BOM and
// CRLF; RFC 4180 quoting; every kind of bad record with its message; skip()
// agreeing with next(); buffer boundaries anywhere; the input fingerprint.
// Expected records are written out by hand from the input text above them.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"
#include "pipeline/record_reader.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

// What a test expects of one record (index and line always checked).
struct Want {
  uint64_t index, line;
  std::string text;
  std::optional<std::string> pair = std::nullopt;
  std::string id_json = "";
  std::string error = "";
  uint64_t replaced = 0;
};

RecordReaderOptions opts(InputFormat f, std::string pair_field = "", std::string id_field = "",
                         std::string text_field = "text") {
  RecordReaderOptions o;
  o.path = "mem";
  o.format = f;
  o.text_field = std::move(text_field);
  o.pair_field = std::move(pair_field);
  o.id_field = std::move(id_field);
  return o;
}

std::unique_ptr<RecordReader> from_string(const std::string& data, const RecordReaderOptions& o,
                                          size_t buffer = RecordReader::kDefaultBufferBytes, size_t max_read = SIZE_MAX) {
  return std::make_unique<RecordReader>(o, memory_byte_source(data, max_read), "mem", data.size(), buffer);
}

std::vector<InputRecord> read_all(RecordReader& r) {
  std::vector<InputRecord> out;
  InputRecord rec;
  while (r.next(rec)) out.push_back(rec);
  return out;
}

std::string show(const InputRecord& r) {
  std::string s = "#" + std::to_string(r.index) + " line " + std::to_string(r.line) + " text=[" + r.text + "]";
  if (r.pair) s += " pair=[" + *r.pair + "]";
  if (!r.id_json.empty()) s += " id=" + r.id_json;
  if (!r.error.empty()) s += " error=" + r.error;
  return s;
}

void expect_records(const std::vector<InputRecord>& got, const std::vector<Want>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(show(got[i]));
    EXPECT_EQ(got[i].index, want[i].index);
    EXPECT_EQ(got[i].line, want[i].line);
    EXPECT_EQ(got[i].text, want[i].text);
    EXPECT_EQ(got[i].pair, want[i].pair);
    EXPECT_EQ(got[i].id_json, want[i].id_json);
    EXPECT_EQ(got[i].error, want[i].error);
    EXPECT_EQ(got[i].replaced_utf8, want[i].replaced);
  }
}

void expect_same(const std::vector<InputRecord>& a, const std::vector<InputRecord>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(show(a[i]), show(b[i]));
}

fs::path write_file(const std::string& name, const std::string& data) {
  const fs::path p = test::scratch_dir("record_reader_" + name) / name;
  std::ofstream(p, std::ios::binary) << data;
  return p;
}

// ---- format names ----------------------------------------------------------

TEST(RecordReaderFormat, NamesRoundTrip) {
  for (InputFormat f : {InputFormat::jsonl, InputFormat::csv, InputFormat::tsv, InputFormat::text})
    EXPECT_EQ(input_format_from_name(input_format_name(f)), f);
  EXPECT_STREQ(input_format_name(InputFormat::tsv), "tsv");
  try {
    input_format_from_name("xml");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("--input-format"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("jsonl, csv, tsv or text"), std::string::npos) << e.what();
  }
}

TEST(RecordReaderFormat, FromPath) {
  EXPECT_EQ(input_format_for_path("-"), InputFormat::jsonl);
  EXPECT_EQ(input_format_for_path("a/b.csv"), InputFormat::csv);
  EXPECT_EQ(input_format_for_path("B.CSV"), InputFormat::csv);
  EXPECT_EQ(input_format_for_path("x.tsv"), InputFormat::tsv);
  EXPECT_EQ(input_format_for_path("x.tab"), InputFormat::tsv);
  EXPECT_EQ(input_format_for_path("x.txt"), InputFormat::text);
  EXPECT_EQ(input_format_for_path("x.jsonl"), InputFormat::jsonl);
  EXPECT_EQ(input_format_for_path("x.json"), InputFormat::jsonl);
  EXPECT_EQ(input_format_for_path("noext"), InputFormat::jsonl);
  EXPECT_EQ(input_format_for_path("dir.csv/file"), InputFormat::jsonl);
}

// ---- JSONL -------------------------------------------------------------------

TEST(RecordReaderJsonl, NumbersRecordsAndSkipsBlankLines) {
  const std::string in =
      "{\"text\": \"a\", \"p\": \"pa\", \"id\": 7}\n"
      "\n"
      "   \t \n"
      "{\"text\": \"\", \"p\": null, \"id\": \"x-1\"}\n"
      "{\"id\": [1, 2], \"text\": \"  \"}\n";
  auto r = from_string(in, opts(InputFormat::jsonl, "p", "id"));
  expect_records(read_all(*r), {{0, 1, "a", "pa", "7"}, {1, 4, "", std::nullopt, "\"x-1\""}, {2, 5, "  ", std::nullopt, "[1,2]"}});
  EXPECT_EQ(r->records(), 3u);
  EXPECT_EQ(r->format(), InputFormat::jsonl);
  InputRecord rec;
  EXPECT_FALSE(r->next(rec));  // stays at the end
}

TEST(RecordReaderJsonl, BomCrlfAndLastLineWithoutNewline) {
  const std::string in = "\xEF\xBB\xBF{\"text\": \"one\"}\r\n\r\n{\"text\": \"two\"}\r\n{\"text\": \"three\"}";
  auto r = from_string(in, opts(InputFormat::jsonl));
  expect_records(read_all(*r), {{0, 1, "one"}, {1, 3, "two"}, {2, 4, "three"}});
}

TEST(RecordReaderJsonl, NoPairOrIdFieldUnlessAsked) {
  auto r = from_string("{\"text\": \"a\", \"text_pair\": \"b\", \"id\": 1}\n", opts(InputFormat::jsonl));
  expect_records(read_all(*r), {{0, 1, "a"}});
}

TEST(RecordReaderJsonl, EveryBadRecordKindWithItsMessage) {
  const std::string in =
      "{\"text\": \"ok\", \"id\": 1}\n"              // 1 good
      "{\"text\": \"unterminated}\n"                 // 2 not JSON
      "[\"text\"]\n"                                 // 3 not an object
      "\"just a string\"\n"                          // 4 not an object
      "{\"body\": \"x\", \"id\": 2}\n"               // 5 text missing
      "{\"text\": 42, \"id\": 3}\n"                  // 6 text not a string
      "{\"text\": null, \"id\": 3}\n"                // 7 text null
      "{\"text\": \"a\", \"p\": 5, \"id\": 4}\n"     // 8 pair not string/null
      "{\"text\": \"a\", \"p\": {}, \"id\": 4}\n"    // 9 pair an object
      "{\"text\": \"a\"}\n"                          // 10 id missing
      "{\"text\": \"a\", \"id\": null}\n"            // 11 id null
      "{\"text\": \"a\", \"id\": 1} trailing\n"      // 12 not JSON
      "{\"text\": \"last\", \"id\": false}\n";       // 13 good
  auto r = from_string(in, opts(InputFormat::jsonl, "p", "id"));
  expect_records(
      read_all(*r),
      {{0, 1, "ok", std::nullopt, "1"},
       {1, 2, "", std::nullopt, "", "not valid JSON (expected one JSON object per line)"},
       {2, 3, "", std::nullopt, "", "expected a JSON object, found array"},
       {3, 4, "", std::nullopt, "", "expected a JSON object, found string"},
       {4, 5, "", std::nullopt, "", "field \"text\" is missing (expected a string)"},
       {5, 6, "", std::nullopt, "", "field \"text\": expected a string, found number"},
       {6, 7, "", std::nullopt, "", "field \"text\": expected a string, found null"},
       {7, 8, "", std::nullopt, "", "field \"p\": expected a string or null, found number"},
       {8, 9, "", std::nullopt, "", "field \"p\": expected a string or null, found object"},
       {9, 10, "", std::nullopt, "", "field \"id\" (--id-field) is missing"},
       {10, 11, "", std::nullopt, "", "field \"id\" (--id-field) is null (expected a value naming the record)"},
       {11, 12, "", std::nullopt, "", "not valid JSON (expected one JSON object per line)"},
       {12, 13, "last", std::nullopt, "false"}});
}

TEST(RecordReaderJsonl, InvalidUtf8IsReplacedAndCountedBeforeParsing) {
  // \xff: one bad byte; \xe2\x82: a truncated 3-byte sequence (one maximal subpart); \xc0\xaf: two bad bytes.
  const std::string in = "{\"text\": \"a\xff" "b\", \"p\": \"\xe2\x82!\"}\n{\"text\": \"\xc0\xaf\"}\n";
  auto r = from_string(in, opts(InputFormat::jsonl, "p"));
  expect_records(read_all(*r), {{0, 1, "a\xEF\xBF\xBD" "b", "\xEF\xBF\xBD!", "", "", 2},
                                {1, 2, "\xEF\xBF\xBD\xEF\xBF\xBD", std::nullopt, "", "", 2}});
}

TEST(RecordReaderJsonl, DescribeBadRecordGivesFileAndLine) {
  const fs::path p = write_file("bad.jsonl", "{\"text\": \"a\"}\n\n{\"text\": 1}\n");
  RecordReaderOptions o;
  o.path = p.string();
  RecordReader r(o);
  InputRecord rec;
  ASSERT_TRUE(r.next(rec));
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(describe_bad_record(r, rec), p.string() + ":3: field \"text\": expected a string, found number");
}

// ---- CSV / TSV ---------------------------------------------------------------

TEST(RecordReaderCsv, QuotingEscapesDelimitersAndMultiLineFields) {
  const std::string in =
      "id,text,pair\n"                           // 1 header
      "1,plain,\n"                               // 2
      "2,\"with, comma\",\"a \"\"quote\"\"\"\n"  // 3
      "3,\"two\nlines\",p\n"                     // 4-5
      "4,say \"hi\" there,\n"                    // 6: quotes inside an unquoted field are literal
      "\"5\",\"\",\"\"\n"                        // 7: empty quoted text is a valid empty text
      "6,\"three\n\nlines\",\n"                  // 8-10
      "7,last,x";                                // 11, no final newline
  auto r = from_string(in, opts(InputFormat::csv, "pair", "id"));
  expect_records(read_all(*r), {{0, 2, "plain", std::nullopt, "\"1\""},
                                {1, 3, "with, comma", "a \"quote\"", "\"2\""},
                                {2, 4, "two\nlines", "p", "\"3\""},
                                {3, 6, "say \"hi\" there", std::nullopt, "\"4\""},
                                {4, 7, "", std::nullopt, "\"5\""},
                                {5, 8, "three\n\nlines", std::nullopt, "\"6\""},
                                {6, 11, "last", "x", "\"7\""}});
}

TEST(RecordReaderCsv, BomAndCrlf) {
  // CRLF ends rows; inside a quoted field the line ending is kept as the file has it.
  const std::string in = "\xEF\xBB\xBFtext,n\r\nfirst,1\r\n\"multi\r\nline\",2\r\n\"q\"\"\",3\r\n";
  auto r = from_string(in, opts(InputFormat::csv));
  expect_records(read_all(*r), {{0, 2, "first"}, {1, 3, "multi\r\nline"}, {2, 5, "q\""}});
}

TEST(RecordReaderCsv, IdCellsBecomeJsonStrings) {
  auto r = from_string("k,text\n42,a\n\"say \"\"x\"\"\\\",b\n,c\n", opts(InputFormat::csv, "", "k"));
  expect_records(read_all(*r), {{0, 2, "a", std::nullopt, "\"42\""},
                                {1, 3, "b", std::nullopt, "\"say \\\"x\\\"\\\\\""},
                                {2, 4, "c", std::nullopt, "\"\""}});
}

TEST(RecordReaderCsv, TsvUsesTabsAndTheSameQuoting) {
  const std::string in = "text\tlabel\na, b\t1\n\"tab\there\"\t2\n\"x\ny\"\t3\n";
  auto r = from_string(in, opts(InputFormat::tsv, "label"));
  expect_records(read_all(*r), {{0, 2, "a, b", "1"}, {1, 3, "tab\there", "2"}, {2, 4, "x\ny", "3"}});
}

TEST(RecordReaderCsv, EveryBadRecordKindWithItsMessage) {
  const std::string in =
      "text,label\n"              // 1
      "good,1\n"                  // 2
      "too,many,fields\n"         // 3
      "few\n"                     // 4
      "\n"                        // 5: an empty line is one empty field: wrong count with two columns
      "\"closed\"x,1\n"           // 6: a character after the closing quote
      "fine,\"2\"\"\" \n"         // 7: a space after the closing quote of field 2
      "after,bad\n"               // 8: the reader is back in step
      "\"never closed,1\nmore\n";  // 9-10: unterminated quote at the end of the input
  auto r = from_string(in, opts(InputFormat::csv, "label"));
  expect_records(
      read_all(*r),
      {{0, 2, "good", "1"},
       {1, 3, "", std::nullopt, "", "expected 2 fields as the header has, found 3"},
       {2, 4, "", std::nullopt, "", "expected 2 fields as the header has, found 1"},
       {3, 5, "", std::nullopt, "", "expected 2 fields as the header has, found 1"},
       {4, 6, "", std::nullopt, "",
        "field 1 (\"text\"): unexpected 'x' after the closing quote (expected ',' or the end of the line; a quote "
        "inside a quoted field is written \"\")"},
       {5, 7, "", std::nullopt, "",
        "field 2 (\"label\"): unexpected ' ' after the closing quote (expected ',' or the end of the line; a quote "
        "inside a quoted field is written \"\")"},
       {6, 8, "after", "bad"},
       {7, 9, "", std::nullopt, "",
        "field 1 (\"text\"): the quote opened on line 9 is never closed (expected a closing quote before the end "
        "of the input)"}});
}

TEST(RecordReaderCsv, UnterminatedQuoteWithoutFinalNewline) {
  auto r = from_string("text\n\"abc", opts(InputFormat::csv));
  expect_records(read_all(*r), {{0, 2, "", std::nullopt, "", "field 1 (\"text\"): the quote opened on line 2 is never "
                                                              "closed (expected a closing quote before the end of the input)"}});
}

TEST(RecordReaderCsv, BadByteAfterQuoteIsShownInHex) {
  auto r = from_string("text\n\"a\"\x01\n", opts(InputFormat::csv));
  auto got = read_all(*r);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].error.find("unexpected 0x01 after the closing quote"), std::string::npos) << got[0].error;
}

TEST(RecordReaderCsv, EmptyLineWithOneColumnIsAnEmptyText) {
  auto r = from_string("text\na\n\nb\n", opts(InputFormat::csv));
  expect_records(read_all(*r), {{0, 2, "a"}, {1, 3, ""}, {2, 4, "b"}});
}

TEST(RecordReaderCsv, InvalidUtf8InAnyCellIsReplacedAndCounted) {
  auto r = from_string("text,other\n\"a\xff\",\xfe\xfe\n", opts(InputFormat::csv));
  expect_records(read_all(*r), {{0, 2, "a\xEF\xBF\xBD", std::nullopt, "", "", 3}});
}

TEST(RecordReaderCsv, EmptyPairCellIsNoPair) {
  auto r = from_string("text,text_pair\na,\nb,\"\"\nc,d\n", opts(InputFormat::csv, "text_pair"));
  expect_records(read_all(*r), {{0, 2, "a"}, {1, 3, "b"}, {2, 4, "c", "d"}});
}

TEST(RecordReaderCsv, PairColumnIsOptional) {
  auto r = from_string("text\na\n", opts(InputFormat::csv, "text_pair"));
  expect_records(read_all(*r), {{0, 2, "a"}});
}

TEST(RecordReaderCsv, EmptyInputAndHeaderOnlyHaveNoRecords) {
  for (const std::string in : {"", "\xEF\xBB\xBF", "text,label\n", "text,label"}) {
    SCOPED_TRACE(in);
    auto r = from_string(in, opts(InputFormat::csv));
    EXPECT_TRUE(read_all(*r).empty());
    EXPECT_EQ(r->records(), 0u);
    EXPECT_EQ(r->skip(5), 0u);
  }
}

void expect_throw(const std::function<void()>& f, Errc code, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " / " << p;
  }
}

TEST(RecordReaderCsv, HeaderProblemsThrowAtConstruction) {
  expect_throw([] { from_string("body,label\nx,1\n", opts(InputFormat::csv)); }, Errc::not_found,
               {"mem: the header has no column \"text\" (--text-field)", "its columns are: \"body\", \"label\""});
  expect_throw([] { from_string("text,label\nx,1\n", opts(InputFormat::csv, "", "id")); }, Errc::not_found,
               {"no column \"id\" (--id-field)", "\"text\", \"label\""});
  expect_throw([] { from_string("text,text\nx,1\n", opts(InputFormat::csv)); }, Errc::format,
               {"column \"text\" (--text-field) twice"});
  expect_throw([] { from_string("\"text\"x,label\n", opts(InputFormat::csv)); }, Errc::format,
               {"mem:1: the header row: field 1: unexpected 'x'"});
  // A header written with a TSV delimiter read as CSV is one column: the message shows it.
  expect_throw([] { from_string("text\tlabel\n", opts(InputFormat::csv)); }, Errc::not_found,
               {"its columns are: \"text\\tlabel\""});
}

// ---- plain text --------------------------------------------------------------

TEST(RecordReaderText, EveryLineIsARecord) {
  auto r = from_string("\xEF\xBB\xBF" "first\r\n\nthird \t\n\r\nlast", opts(InputFormat::text));
  expect_records(read_all(*r), {{0, 1, "first"}, {1, 2, ""}, {2, 3, "third \t"}, {3, 4, ""}, {4, 5, "last"}});
}

TEST(RecordReaderText, TrailingNewlineMakesNoExtraRecord) {
  auto r = from_string("a\nb\n", opts(InputFormat::text));
  expect_records(read_all(*r), {{0, 1, "a"}, {1, 2, "b"}});
  r = from_string("\n", opts(InputFormat::text));
  expect_records(read_all(*r), {{0, 1, ""}});
  r = from_string("", opts(InputFormat::text));
  expect_records(read_all(*r), {});
}

TEST(RecordReaderText, LinesAreNotParsed) {
  auto r = from_string("{\"text\": 1}\na,\"b\n\xff\n", opts(InputFormat::text));
  expect_records(read_all(*r), {{0, 1, "{\"text\": 1}"}, {1, 2, "a,\"b"}, {2, 3, "\xEF\xBF\xBD", std::nullopt, "", "", 1}});
}

TEST(RecordReaderText, IdOrPairFieldIsRefused) {
  expect_throw([] { from_string("a\n", opts(InputFormat::text, "", "id")); }, Errc::invalid_argument,
               {"--id-field \"id\"", "plain text", "no fields"});
  expect_throw([] { from_string("a\n", opts(InputFormat::text, "text_pair")); }, Errc::invalid_argument,
               {"--pair-field \"text_pair\"", "no fields"});
  // The text field is not a field of plain text; any name is fine.
  auto r = from_string("a\n", opts(InputFormat::text, "", "", "whatever"));
  expect_records(read_all(*r), {{0, 1, "a"}});
}

// ---- label field (training data) ------------------------------------------------

TEST(RecordReaderLabel, JsonlLabelsKeepTheirJsonAndMissingOrNullIsABadRecord) {
  RecordReaderOptions o = opts(InputFormat::jsonl);
  o.label_field = "label";
  auto r = from_string(
      "{\"text\": \"a\", \"label\": 2}\n{\"text\": \"b\", \"label\": \"pos\"}\n{\"text\": \"c\", \"label\": 0.5}\n"
      "{\"text\": \"d\"}\n{\"text\": \"e\", \"label\": null}\n",
      o);
  const auto recs = read_all(*r);
  ASSERT_EQ(recs.size(), 5u);
  EXPECT_EQ(recs[0].label_json, "2");
  EXPECT_EQ(recs[1].label_json, "\"pos\"");
  EXPECT_EQ(recs[2].label_json, "0.5");
  EXPECT_NE(recs[3].error.find("field \"label\" (--label-field) is missing"), std::string::npos) << recs[3].error;
  EXPECT_NE(recs[4].error.find("is null"), std::string::npos) << recs[4].error;
}

TEST(RecordReaderLabel, CsvNumbersBecomeNumbersOtherCellsStrings) {
  RecordReaderOptions o = opts(InputFormat::csv);
  o.label_field = "label";
  auto r = from_string("text,label\na,1\nb,neg\nc,-0.25\nd,\"1 2\"\n", o);
  const auto recs = read_all(*r);
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[0].label_json, "1");
  EXPECT_EQ(recs[1].label_json, "\"neg\"");
  EXPECT_EQ(recs[2].label_json, "-0.25");
  EXPECT_EQ(recs[3].label_json, "\"1 2\"");
  RecordReaderOptions missing = opts(InputFormat::csv);
  missing.label_field = "y";
  expect_throw([&] { from_string("text,label\na,1\n", missing); }, Errc::not_found, {"--label-field", "\"y\""});
  RecordReaderOptions text = opts(InputFormat::text);
  text.label_field = "label";
  expect_throw([&] { from_string("a\n", text); }, Errc::invalid_argument, {"--label-field", "no fields"});
}

// ---- all formats: buffer boundaries, skip -------------------------------------

struct Case {
  const char* name;
  InputFormat format;
  std::string input;
  std::string pair_field, id_field;
};

std::vector<Case> cases() {
  return {
      {"jsonl", InputFormat::jsonl,
       "\xEF\xBB\xBF{\"text\": \"a\", \"id\": 1}\n\n{\"text\": \"b\xff\", \"p\": \"q\", \"id\": 2}\r\n  \n"
       "{\"text\": 3, \"id\": 3}\n{\"id\": 4, \"text\": \"a longer text with spaces in it\"}\nnot json\n"
       "{\"text\": \"end\", \"id\": 6}",
       "p", "id"},
      {"csv", InputFormat::csv,
       "\xEF\xBB\xBFid,text,p\r\n1,a,\n2,\"b\nc\",q\r\n3,\"x\"y,\n\n4,\"d,\"\"e\"\"\",f\n5,g\n6,\"h\r\n\r\ni\",\n"
       "7,\"open\n",
       "p", "id"},
      {"tsv", InputFormat::tsv, "text\tid\na\t1\n\"b\tc\"\t2\n\"d\ne\"\t3\nf\n\tg\n", "", "id"},
      {"text", InputFormat::text, "\xEF\xBB\xBFone\n\ntwo\r\n\xe2\x82\nthree", "", ""},
  };
}

TEST(RecordReaderAll, SameRecordsAtEveryBufferSizeAndReadSize) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    auto o = opts(c.format, c.pair_field, c.id_field);
    auto ref_reader = from_string(c.input, o);
    const auto ref = read_all(*ref_reader);
    ASSERT_GE(ref.size(), 5u);
    for (size_t buffer : {1, 2, 3, 5, 8, 64}) {
      for (size_t max_read : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, SIZE_MAX}) {
        SCOPED_TRACE("buffer " + std::to_string(buffer) + " read " + std::to_string(max_read));
        auto r = from_string(c.input, o, buffer, max_read);
        expect_same(read_all(*r), ref);
        EXPECT_EQ(r->bytes_read(), c.input.size());
        EXPECT_EQ(r->sha256_so_far(), sha256_hex(c.input));
      }
    }
  }
}

TEST(RecordReaderAll, SkipThenNextGivesTheSameRecordAsReadingThrough) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    auto o = opts(c.format, c.pair_field, c.id_field);
    auto ref_reader = from_string(c.input, o);
    const auto ref = read_all(*ref_reader);
    for (size_t k = 0; k <= ref.size() + 1; ++k) {
      SCOPED_TRACE("skip " + std::to_string(k));
      auto r = from_string(c.input, o, 4, 3);
      EXPECT_EQ(r->skip(k), std::min(k, ref.size()));
      EXPECT_EQ(r->records(), std::min(k, ref.size()));
      auto rest = read_all(*r);
      expect_same(rest, std::vector<InputRecord>(ref.begin() + static_cast<long>(std::min(k, ref.size())), ref.end()));
      EXPECT_EQ(r->records(), ref.size());
    }
    // Skipping in several steps counts the same as one.
    auto r = from_string(c.input, o);
    EXPECT_EQ(r->skip(1) + r->skip(2), 3u);
    InputRecord rec;
    ASSERT_TRUE(r->next(rec));
    EXPECT_EQ(show(rec), show(ref[3]));
  }
}

TEST(RecordReaderAll, RecordsCountsReturnedAndSkipped) {
  auto r = from_string("a\nb\nc\nd\n", opts(InputFormat::text));
  InputRecord rec;
  ASSERT_TRUE(r->next(rec));
  EXPECT_EQ(r->records(), 1u);
  EXPECT_EQ(r->skip(2), 2u);
  EXPECT_EQ(r->records(), 3u);
  ASSERT_TRUE(r->next(rec));
  EXPECT_EQ(rec.index, 3u);
  EXPECT_EQ(rec.text, "d");
  EXPECT_EQ(r->skip(10), 0u);
}

// ---- files -------------------------------------------------------------------

TEST(RecordReaderFile, ReadsAFileAndFingerprintsIt) {
  std::string data = "text,id\n";
  for (int i = 0; i < 5000; ++i) data += "\"row " + std::to_string(i) + ", quoted\"," + std::to_string(i) + "\n";
  const fs::path p = write_file("rows.csv", data);
  RecordReaderOptions o;
  o.path = p.string();
  o.id_field = "id";
  RecordReader r(o);  // the format comes from the name
  EXPECT_EQ(r.format(), InputFormat::csv);
  EXPECT_EQ(r.label(), p.string());
  EXPECT_EQ(r.total_bytes(), data.size());
  InputRecord rec;
  uint64_t n = 0;
  while (r.next(rec)) {
    ASSERT_TRUE(rec.error.empty()) << rec.error;
    ASSERT_EQ(rec.text, "row " + std::to_string(n) + ", quoted");
    ASSERT_EQ(rec.id_json, "\"" + std::to_string(n) + "\"");
    ASSERT_EQ(rec.line, n + 2);
    ++n;
  }
  EXPECT_EQ(n, 5000u);
  EXPECT_EQ(r.bytes_read(), data.size());
  EXPECT_EQ(r.sha256_so_far(), sha256_file(p));
  EXPECT_EQ(r.sha256_so_far(), sha256_file(p));  // asking does not disturb the hash
}

TEST(RecordReaderFile, LineLongerThanTheBuffer) {
  const std::string big(3 * RecordReader::kDefaultBufferBytes + 17, 'x');
  const fs::path p = write_file("big.jsonl", "{\"text\": \"" + big + "\"}\n{\"text\": \"after\"}\n");
  RecordReaderOptions o;
  o.path = p.string();
  RecordReader r(o);
  InputRecord rec;
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.text, big);
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.text, "after");
  EXPECT_EQ(rec.line, 2u);
  EXPECT_FALSE(r.next(rec));
  EXPECT_EQ(r.sha256_so_far(), sha256_file(p));
}

TEST(RecordReaderFile, ExplicitFormatWinsOverTheName) {
  const fs::path p = write_file("lines.txt", "{\"text\": \"json after all\"}\n");
  RecordReaderOptions o;
  o.path = p.string();
  o.format = InputFormat::jsonl;
  RecordReader r(o);
  InputRecord rec;
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.text, "json after all");
}

TEST(RecordReaderFile, EmptyFile) {
  for (const char* name : {"empty.jsonl", "empty.csv", "empty.tsv", "empty.txt"}) {
    SCOPED_TRACE(name);
    const fs::path p = write_file(name, "");
    RecordReaderOptions o;
    o.path = p.string();
    RecordReader r(o);
    InputRecord rec;
    EXPECT_FALSE(r.next(rec));
    EXPECT_EQ(r.records(), 0u);
    EXPECT_EQ(r.total_bytes(), 0u);
    EXPECT_EQ(r.sha256_so_far(), sha256_hex(""));
  }
}

TEST(RecordReaderFile, MissingFileOrFolderThrows) {
  RecordReaderOptions o;
  o.path = (test::scratch_dir("record_reader_missing") / "nope.jsonl").string();
  expect_throw([&] { RecordReader r(o); }, Errc::not_found, {"nope.jsonl: no such input file"});
  o.path = test::scratch_dir("record_reader_folder").string();
  expect_throw([&] { RecordReader r(o); }, Errc::invalid_argument, {"is a folder"});
}

TEST(RecordReaderFile, StdinHasALabelAndNoSize) {
  // Reading stdin itself is left to the CLI tests; the label and size are the reader's.
  RecordReaderOptions o;
  o.path = "-";
  o.format = InputFormat::text;
  RecordReader r(o);
  EXPECT_EQ(r.label(), "<stdin>");
  EXPECT_EQ(r.total_bytes(), 0u);
  EXPECT_EQ(r.format(), InputFormat::text);
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

// Several files read as one input: records numbered across them, line numbers
// and the file index per file, each CSV file with its own header, a last line
// without a newline not running into the next file, skip() crossing files.
TEST(RecordReaderFiles, SeveralFilesAreOneInputNumberedAcross) {
  const fs::path dir = test::scratch_dir("reader-files");
  std::ofstream(dir / "a.jsonl") << "{\"text\": \"a0\"}\n\n{\"text\": \"a1\"}";  // no final newline
  std::ofstream(dir / "b.jsonl") << "";
  std::ofstream(dir / "c.jsonl") << "{\"text\": \"c0\"}\n{\"text\": 3}\n";
  RecordReaderOptions o;
  o.paths = {(dir / "a.jsonl").string(), (dir / "b.jsonl").string(), (dir / "c.jsonl").string()};
  RecordReader r(o);
  EXPECT_EQ(r.total_bytes(), fs::file_size(dir / "a.jsonl") + fs::file_size(dir / "c.jsonl"));
  const auto got = read_all(r);
  ASSERT_EQ(got.size(), 4u);
  const std::vector<std::tuple<std::string, uint64_t, uint32_t>> want = {{"a0", 1, 0}, {"a1", 3, 0}, {"c0", 1, 2}, {"", 2, 2}};
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].index, i);
    EXPECT_EQ(got[i].text, std::get<0>(want[i])) << show(got[i]);
    EXPECT_EQ(got[i].line, std::get<1>(want[i])) << show(got[i]);
    EXPECT_EQ(got[i].file, std::get<2>(want[i])) << show(got[i]);
  }
  EXPECT_NE(got[3].error.find("expected a string"), std::string::npos);

  RecordReader s(o);
  EXPECT_EQ(s.skip(3), 3u);
  InputRecord rec;
  ASSERT_TRUE(s.next(rec));
  EXPECT_EQ(rec.index, 3u);
  EXPECT_EQ(rec.file, 2u);
  EXPECT_EQ(s.label(), (dir / "c.jsonl").string());
  EXPECT_FALSE(s.next(rec));
}

TEST(RecordReaderFiles, EachCsvFileHasItsOwnHeader) {
  const fs::path dir = test::scratch_dir("reader-csv-files");
  std::ofstream(dir / "a.csv") << "id,text\n1,first\n";
  std::ofstream(dir / "b.csv") << "text,id\nsecond,2\n";  // columns in another order
  RecordReaderOptions o;
  o.paths = {(dir / "a.csv").string(), (dir / "b.csv").string()};
  o.id_field = "id";
  RecordReader r(o);
  const auto got = read_all(r);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].text, "first");
  EXPECT_EQ(got[1].text, "second");
  EXPECT_EQ(got[1].id_json, "\"2\"");
  EXPECT_EQ(got[1].index, 1u);
  EXPECT_EQ(got[1].line, 2u);

  o.paths.push_back((dir / "missing.csv").string());
  try {
    RecordReader bad(o);
    ADD_FAILURE() << "a missing file among several must be named before reading";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.csv: no such input file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stoke
