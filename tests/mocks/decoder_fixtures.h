// Shared set-up for the Decoder's unit tests (core/kafka/decoder_test.cc,
// core/kafka/decoder_utf8_test.cc): a TopicConfig naming where key and type come
// from, and a Decoder built from such topics. One copy here instead of one per
// test file; the records each test decodes stay in the test file.
//
// Threading: plain functions with no state of their own.
#ifndef FERRY_TESTS_MOCKS_DECODER_FIXTURES_H_
#define FERRY_TESTS_MOCKS_DECODER_FIXTURES_H_

#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/kafka/decoder.h"

namespace ferry::testing {

// Topic `name` with its key and type taken from `key` and `type`, every other
// field at its default.
TopicConfig Topic(const std::string& name, FieldSource key, FieldSource type);

// Decoder::Create(topics); a failure is a test failure and returns nullptr.
std::unique_ptr<Decoder> MustCreate(const std::vector<TopicConfig>& topics);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_MOCKS_DECODER_FIXTURES_H_
