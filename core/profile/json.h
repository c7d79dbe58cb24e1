// A minimal JSON reader/writer for the files SpexLab exchanges (Chrome traces, bench
// and sweep results). Core stays free of Qt and third-party JSON libraries.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace spex::json {

class Value {
public:
  enum class Type { Null, Bool, Number, String, Array, Object };
  Type type = Type::Null;

  bool isArray() const { return type == Type::Array; }
  bool isObject() const { return type == Type::Object; }
  bool isString() const { return type == Type::String; }
  bool isNumber() const { return type == Type::Number; }
  double number() const { return m_number; }
  bool boolean() const { return m_bool; }
  const std::string& string() const { return m_string; }
  const std::vector<Value>& array() const { return m_array; }
  const std::map<std::string, Value>& object() const { return m_object; }
  // Member of an object, nullptr if absent or not an object.
  const Value* get(const std::string& key) const;

  static Value makeNumber(double v);
  static Value makeString(std::string s);
  static Value makeBool(bool b);

private:
  friend class Parser;
  double m_number = 0;
  bool m_bool = false;
  std::string m_string;
  std::vector<Value> m_array;
  std::map<std::string, Value> m_object;
};

// Throws std::runtime_error with the offset of the problem.
Value parse(const std::string& text);
// A JSON string literal with escapes.
std::string quote(const std::string& s);

} // namespace spex::json
