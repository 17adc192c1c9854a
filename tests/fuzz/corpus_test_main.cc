// The regression-test driver of a fuzz target in the normal build: one gtest
// test per file of its corpus (--corpus=DIR), each feeding the file to
// LLVMFuzzerTestOneInput; a target reports a violated property by aborting,
// which fails the test. Files of --known_crashes=DIR reproduce defects whose
// fix has not landed: they are registered DISABLED_ (see crashes/README.md;
// run them with --gtest_also_run_disabled_tests).
//
// An empty or missing corpus is an error, so the test can never pass by
// running nothing.
#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> files;
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return files;
  while (const dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    if (name == "." || name == ".." || name == "README.md") continue;
    files.push_back(name);
  }
  closedir(handle);
  std::sort(files.begin(), files.end());
  return files;
}

// A gtest-safe name for a corpus file.
std::string TestName(const std::string& file) {
  std::string name = file;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class CorpusFile : public ::testing::Test {
 public:
  explicit CorpusFile(std::string path) : path_(std::move(path)) {}
  void TestBody() override {
    std::ifstream in(path_, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << path_;
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }

 private:
  std::string path_;
};

void Register(const std::string& dir, const std::string& prefix) {
  for (const std::string& file : FilesIn(dir)) {
    const std::string path = dir + "/" + file;
    ::testing::RegisterTest("Corpus", (prefix + TestName(file)).c_str(), nullptr, path.c_str(),
                            __FILE__, __LINE__,
                            [path]() -> ::testing::Test* { return new CorpusFile(path); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string corpus;
  std::string known_crashes;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--corpus=", 9) == 0) corpus = argv[i] + 9;
    if (std::strncmp(argv[i], "--known_crashes=", 16) == 0) known_crashes = argv[i] + 16;
  }
  if (corpus.empty() || FilesIn(corpus).empty()) {
    std::fprintf(stderr, "no corpus files in '%s' (--corpus=DIR)\n", corpus.c_str());
    return 1;
  }
  Register(corpus, "");
  if (!known_crashes.empty()) Register(known_crashes, "DISABLED_");
  return RUN_ALL_TESTS();
}
