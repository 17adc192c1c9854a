#include "core/kafka/decoder.h"

#include <cstdint>
#include <exception>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/kafka/event_header.h"
#include "core/common/utf8.h"

namespace ferry {
namespace {

using json = nlohmann::json;

// The source as written in the config, for error messages.
std::string SourceSpelling(const FieldSource& source) {
  switch (source.kind) {
    case FieldSource::Kind::kRecordKey:
      return "record_key";
    case FieldSource::Kind::kHeader:
      return absl::StrCat("header:", source.argument);
    case FieldSource::Kind::kJson:
      return absl::StrCat("json:", source.argument);
    case FieldSource::Kind::kTopic:
      return "topic";
    case FieldSource::Kind::kConstant:
      return absl::StrCat("const:", source.argument);
  }
  return "?";
}

absl::Status ValidateSource(const std::string& topic, absl::string_view field,
                            const FieldSource& source) {
  switch (source.kind) {
    case FieldSource::Kind::kHeader:
      if (source.argument.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("topic \"", topic, "\": ", field,
                         ": header: needs a header name"));
      }
      return absl::OkStatus();
    case FieldSource::Kind::kJson:
      // Pointers are validated once here, with nlohmann's own parser, so the
      // per-record walk (which never throws) only ever sees well-formed ones.
      try {
        json::json_pointer pointer(source.argument);
        (void)pointer;
      } catch (const std::exception& e) {
        return absl::InvalidArgumentError(absl::StrCat(
            "topic \"", topic, "\": ", field, ": invalid JSON Pointer \"",
            absl::CEscape(source.argument),
            "\" (it must be empty or start with '/', e.g. /user/id): ",
            e.what()));
      }
      return absl::OkStatus();
    case FieldSource::Kind::kRecordKey:
    case FieldSource::Kind::kTopic:
    case FieldSource::Kind::kConstant:
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "topic \"", topic, "\": ", field, ": unknown field source kind"));
}

// Resolves a JSON Pointer (RFC 6901) that ValidateSource accepted, without
// exceptions: nlohmann's contains()/at() may throw on array indices that do
// not fit in size_t, and a record must never be able to make Decode throw.
const json* Resolve(const json& document, absl::string_view pointer) {
  const json* current = &document;
  size_t pos = 0;
  while (pos < pointer.size()) {
    // pointer[pos] == '/': the token runs to the next '/'.
    size_t end = pointer.find('/', pos + 1);
    if (end == absl::string_view::npos) end = pointer.size();
    const absl::string_view raw = pointer.substr(pos + 1, end - pos - 1);
    pos = end;
    std::string token;
    token.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && i + 1 < raw.size()) {
        token.push_back(raw[i + 1] == '1' ? '/' : '~');
        ++i;
      } else {
        token.push_back(raw[i]);
      }
    }
    if (current->is_object()) {
      auto it = current->find(token);
      if (it == current->end()) return nullptr;
      current = &*it;
    } else if (current->is_array()) {
      // RFC 6901 array index: "0" or digits without a leading zero.
      if (token.empty() || (token.size() > 1 && token[0] == '0')) {
        return nullptr;
      }
      for (char c : token) {
        if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return nullptr;
      }
      uint64_t index = 0;
      if (!absl::SimpleAtoi(token, &index) || index >= current->size()) {
        return nullptr;
      }
      current = &(*current)[static_cast<size_t>(index)];
    } else {
      return nullptr;
    }
  }
  return current;
}

const char* JsonTypeName(const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::null:
      return "null";
    default:
      return "not a scalar";
  }
}

// Per-record decoding state: the payload is parsed at most once.
class RecordContext {
 public:
  explicit RecordContext(const RawRecord& record) : record_(record) {}

  std::string Where() const {
    return absl::StrCat(record_.topic, "/", record_.partition, "@",
                        record_.offset);
  }

  // The payload as JSON, or nullptr if it is not valid JSON.
  const json* Document() {
    if (!parsed_) {
      parsed_ = true;
      document_ = json::parse(record_.payload, nullptr,
                              /*allow_exceptions=*/false);
    }
    return document_.is_discarded() ? nullptr : &document_;
  }

  absl::Status Extract(const FieldSource& source, absl::string_view field,
                       std::string* out) {
    switch (source.kind) {
      case FieldSource::Kind::kRecordKey:
        // Assigned in place (value_or would build a temporary string).
        if (record_.key.has_value()) {
          out->assign(*record_.key);
        } else {
          out->clear();
        }
        return absl::OkStatus();
      case FieldSource::Kind::kTopic:
        *out = record_.topic;
        return absl::OkStatus();
      case FieldSource::Kind::kConstant:
        *out = source.argument;
        return absl::OkStatus();
      case FieldSource::Kind::kHeader:
        // Kafka convention: when a header repeats, the last one wins.
        for (auto it = record_.headers.rbegin(); it != record_.headers.rend();
             ++it) {
          if (it->first == source.argument) {
            *out = it->second;
            return absl::OkStatus();
          }
        }
        return absl::InvalidArgumentError(
            absl::StrCat(Where(), ": ", field, ": header \"",
                         absl::CEscape(source.argument), "\" is missing"));
      case FieldSource::Kind::kJson: {
        const json* document = Document();
        if (document == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(), ": ", field, ": payload is not valid JSON (needed for ",
              SourceSpelling(source), ")"));
        }
        const json* value = Resolve(*document, source.argument);
        if (value == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(), ": ", field, ": JSON field \"",
                           absl::CEscape(source.argument),
                           "\" is missing from the payload"));
        }
        if (value->is_string()) {
          *out = value->get_ref<const std::string&>();
        } else if (value->is_number() || value->is_boolean()) {
          *out = value->dump();
        } else {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(), ": ", field, ": JSON field \"",
              absl::CEscape(source.argument), "\" is ", JsonTypeName(*value),
              ", expected a string, number or boolean"));
        }
        return absl::OkStatus();
      }
    }
    return absl::InternalError(
        absl::StrCat(Where(), ": ", field, ": unknown field source kind"));
  }

 private:
  const RawRecord& record_;
  bool parsed_ = false;
  json document_;
};

}  // namespace

Decoder::Decoder(const std::map<std::string, TopicConfig>& topics) {
  for (const auto& [name, config] : topics) {
    topics_.emplace(name, Topic{config, IsValidUtf8(name)});
  }
}

absl::StatusOr<std::unique_ptr<Decoder>> Decoder::Create(
    const std::vector<TopicConfig>& topics) {
  std::map<std::string, TopicConfig> by_name;
  for (const TopicConfig& topic : topics) {
    if (topic.name.empty()) {
      return absl::InvalidArgumentError("a topic has an empty name");
    }
    absl::Status status = ValidateSource(topic.name, "key", topic.key);
    if (!status.ok()) return status;
    status = ValidateSource(topic.name, "type", topic.type);
    if (!status.ok()) return status;
    if (!by_name.emplace(topic.name, topic).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("topic \"", topic.name, "\" is configured twice"));
    }
  }
  return std::unique_ptr<Decoder>(new Decoder(by_name));
}

absl::Status Decoder::KeyAndType(const RawRecord& record, std::string* key,
                                  std::string* type) const {
  static const TopicConfig* const kDefaults = new TopicConfig();
  auto found = topics_.find(record.topic);
  const TopicConfig& topic =
      found == topics_.end() ? *kDefaults : found->second.config;
  // A configured topic's name was checked once, in the constructor.
  const bool topic_is_utf8 =
      found != topics_.end() ? found->second.name_is_utf8 : IsValidUtf8(record.topic);

  RecordContext context(record);
  // Event.topic and Event.type are proto3 strings: a worker must reject a
  // message holding invalid UTF-8 in them, so such a record is poison. (Kafka
  // brokers only accept ASCII topic names; the check costs nothing.)
  if (!topic_is_utf8) {
    return absl::InvalidArgumentError(
        absl::StrCat(absl::CEscape(context.Where()), ": topic name is not valid UTF-8"));
  }
  absl::Status status = context.Extract(topic.key, "key", key);
  if (!status.ok()) return status;
  status = context.Extract(topic.type, "type", type);
  if (!status.ok()) return status;
  // A type taken from the topic name is the name just checked.
  if (topic.type.kind != FieldSource::Kind::kTopic && !IsValidUtf8(*type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(context.Where(), ": type: value from ",
                     SourceSpelling(topic.type), " is not valid UTF-8"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Event> Decoder::Decode(const RawRecord& record) const {
  std::string key;
  std::string type;
  absl::Status status = KeyAndType(record, &key, &type);
  if (!status.ok()) return status;
  v1::Event event;
  event.set_topic(record.topic);
  event.set_partition(record.partition);
  event.set_offset(record.offset);
  event.set_key(std::move(key));
  event.set_type(std::move(type));
  event.set_payload(record.payload);
  for (const auto& [name, value] : record.headers) AddEventHeader(&event, name, value);
  event.set_timestamp_ms(record.timestamp_ms);
  return event;
}

absl::StatusOr<v1::Event> Decoder::Decode(RawRecord&& record) const {
  v1::Event event;
  absl::Status status = DecodeInto(record, &event);
  if (!status.ok()) return status;  // `record` untouched: it goes out as poison
  return event;
}

absl::Status Decoder::DecodeInto(RawRecord& record, v1::Event* event) const {
  event->Clear();
  // Key and type straight into the event: nothing is moved out of `record`
  // until both are known, so a poison record stays whole.
  absl::Status status = KeyAndType(record, event->mutable_key(), event->mutable_type());
  if (!status.ok()) return status;
  // Swapped, not moved: moving would free the recycled event's buffers here
  // and leave `record` to allocate new ones for the next record.
  event->mutable_topic()->swap(record.topic);
  event->set_partition(record.partition);
  event->set_offset(record.offset);
  event->mutable_payload()->swap(record.payload);
  for (auto& [name, value] : record.headers) {
    AddEventHeader(event, std::move(name), std::move(value));
  }
  event->set_timestamp_ms(record.timestamp_ms);
  return absl::OkStatus();
}

}  // namespace ferry
