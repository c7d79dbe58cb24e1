#include "json.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace spex::json {

const Value* Value::get(const std::string& key) const {
  if (type != Type::Object) return nullptr;
  auto it = m_object.find(key);
  return it == m_object.end() ? nullptr : &it->second;
}

Value Value::makeNumber(double v) {
  Value x;
  x.type = Type::Number;
  x.m_number = v;
  return x;
}
Value Value::makeString(std::string s) {
  Value x;
  x.type = Type::String;
  x.m_string = std::move(s);
  return x;
}
Value Value::makeBool(bool b) {
  Value x;
  x.type = Type::Bool;
  x.m_bool = b;
  return x;
}

class Parser {
public:
  explicit Parser(const std::string& t) : s(t) {}
  Value parseDocument() {
    Value v = value(0);
    ws();
    if (i != s.size()) fail("trailing characters");
    return v;
  }

private:
  const std::string& s;
  std::size_t i = 0;

  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string("JSON: ") + what + " at offset " + std::to_string(i));
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  }
  bool take(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  Value value(int depth) {
    if (depth > 200) fail("nesting too deep");
    ws();
    if (i >= s.size()) fail("unexpected end");
    const char c = s[i];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value::makeString(str());
    if (s.compare(i, 4, "true") == 0) {
      i += 4;
      return Value::makeBool(true);
    }
    if (s.compare(i, 5, "false") == 0) {
      i += 5;
      return Value::makeBool(false);
    }
    if (s.compare(i, 4, "null") == 0) {
      i += 4;
      return Value{};
    }
    return num();
  }
  Value object(int depth) {
    Value v;
    v.type = Value::Type::Object;
    ++i;
    if (take('}')) return v;
    do {
      ws();
      if (i >= s.size() || s[i] != '"') fail("expected a key");
      std::string k = str();
      if (!take(':')) fail("expected ':'");
      v.m_object[k] = value(depth + 1);
    } while (take(','));
    if (!take('}')) fail("expected '}'");
    return v;
  }
  Value array(int depth) {
    Value v;
    v.type = Value::Type::Array;
    ++i;
    if (take(']')) return v;
    do {
      v.m_array.push_back(value(depth + 1));
    } while (take(','));
    if (!take(']')) fail("expected ']'");
    return v;
  }
  std::string str() {
    ++i; // opening quote
    std::string out;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= s.size()) fail("bad escape");
      c = s[i++];
      switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'u': {
        if (i + 4 > s.size()) fail("bad \\u escape");
        const unsigned cp = unsigned(std::strtoul(s.substr(i, 4).c_str(), nullptr, 16));
        i += 4;
        if (cp < 0x80) out += char(cp);
        else if (cp < 0x800) {
          out += char(0xC0 | (cp >> 6));
          out += char(0x80 | (cp & 0x3F));
        } else {
          out += char(0xE0 | (cp >> 12));
          out += char(0x80 | ((cp >> 6) & 0x3F));
          out += char(0x80 | (cp & 0x3F));
        }
        break;
      }
      default: out += c;
      }
    }
    if (i >= s.size()) fail("unterminated string");
    ++i;
    return out;
  }
  Value num() {
    const char* begin = s.c_str() + i;
    char* end = nullptr;
    const double v = std::strtod(begin, &end);
    if (end == begin) fail("unexpected character");
    i += std::size_t(end - begin);
    return Value::makeNumber(v);
  }
};

Value parse(const std::string& text) { return Parser(text).parseDocument(); }

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    case '\r': out += "\\r"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else
        out += c;
    }
  }
  return out + "\"";
}

} // namespace spex::json
