// eval's tokenizer and recursive-descent parser: an expression, its columns remembered
// for the errors, bound names resolved to arrays or constants.

#include "tree.hpp"

namespace ooc::kernels::expr_detail {

[[noreturn]] void fail_at(std::string_view text, int column, const std::string& message) {
  std::string before(text.substr(0, static_cast<std::size_t>(std::max(0, column - 1))));
  while (!before.empty() && before.back() == ' ') before.pop_back();
  const std::string after(text.substr(std::min(text.size(), static_cast<std::size_t>(std::max(0, column - 1)))));
  throw UsageError("eval: " + before + (before.empty() ? "^" : " ^") + after + " " + message + " at column " +
                           std::to_string(column));
}

namespace {

// ---- parser -------------------------------------------------------------------------------

class Parser {
 public:
  Parser(std::string_view text, const std::vector<Binding>& bindings) : text_(text), bindings_(bindings) {
    tokenize();
  }

  // expression [reduction] -> root; nodes_ holds the tree in creation order (children first).
  int parse(std::optional<std::pair<std::string, int>>& reduction) {
    if (peek().kind == Tok::name && is_reduction(peek().text) && tokens_[pos_ + 1].text == "(") {
      reduction = std::make_pair(peek().text, peek().column);
      pos_ += 2;
      const int root = comparison();
      expect(")");
      expect_end();
      return root;
    }
    const int root = comparison();
    expect_end();
    return root;
  }

  std::vector<Node> nodes_;

 private:
  static bool is_reduction(std::string_view name) {
    for (std::string_view r : {"sum", "prod", "mean", "min", "max", "argmin", "argmax", "var", "std",
                               "count_nonzero", "any", "all", "nansum", "nanmean", "nanmin", "nanmax", "norm"})
      if (r == name) return true;
    return false;
  }

  void tokenize() {
    std::size_t i = 0;
    while (i < text_.size()) {
      const char c = text_[i];
      const int column = static_cast<int>(i) + 1;
      if (c == ' ' || c == '\t') {
        ++i;
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && i + 1 < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i + 1])))) {
        std::size_t j = i;
        while (j < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[j])) || text_[j] == '.')) ++j;
        if (j < text_.size() && (text_[j] == 'e' || text_[j] == 'E')) {
          std::size_t k = j + 1;
          if (k < text_.size() && (text_[k] == '+' || text_[k] == '-')) ++k;
          if (k < text_.size() && std::isdigit(static_cast<unsigned char>(text_[k]))) {
            j = k;
            while (j < text_.size() && std::isdigit(static_cast<unsigned char>(text_[j]))) ++j;
          }
        }
        tokens_.push_back({Tok::number, std::string(text_.substr(i, j - i)), column});
        i = j;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t j = i;
        while (j < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[j])) || text_[j] == '_')) ++j;
        tokens_.push_back({Tok::name, std::string(text_.substr(i, j - i)), column});
        i = j;
      } else {
        static constexpr std::string_view kTwo[] = {"**", "<=", ">=", "==", "!="};
        static constexpr std::string_view kOne = "+-*/()<>,";
        std::string op;
        for (std::string_view two : kTwo)
          if (text_.substr(i, 2) == two) op = std::string(two);
        if (op.empty() && kOne.find(c) != std::string_view::npos) op = std::string(1, c);
        if (op.empty()) fail_at(text_, column, "unexpected character '" + std::string(1, c) + "'");
        tokens_.push_back({Tok::op, op, column});
        i += op.size();
      }
    }
    tokens_.push_back({Tok::end, "", static_cast<int>(text_.size()) + 1});
  }

  const Token& peek() const { return tokens_[pos_]; }
  bool accept(std::string_view op) {
    if (peek().kind == Tok::op && peek().text == op) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(std::string_view op) {
    if (!accept(op)) fail_at(text_, peek().column, "expected '" + std::string(op) + "'");
  }
  void expect_end() {
    if (peek().kind != Tok::end) fail_at(text_, peek().column, "unexpected '" + peek().text + "' after the expression");
  }

  int add(Node node) {
    nodes_.push_back(std::move(node));
    return static_cast<int>(nodes_.size()) - 1;
  }
  int ufunc(Ufunc f, int column, std::vector<int> args) {
    Node n;
    n.kind = Node::Kind::ufunc;
    n.ufunc = f;
    n.column = column;
    n.args = std::move(args);
    return add(std::move(n));
  }

  int comparison() {
    const int left = arith();
    static const std::pair<std::string_view, Ufunc> kComparisons[] = {
        {"<", Ufunc::less}, {"<=", Ufunc::less_equal}, {">", Ufunc::greater}, {">=", Ufunc::greater_equal},
        {"==", Ufunc::equal}, {"!=", Ufunc::not_equal}};
    for (const auto& [op, f] : kComparisons) {
      if (peek().kind != Tok::op || peek().text != op) continue;
      const int column = peek().column;
      ++pos_;
      const int right = arith();
      for (const auto& [again, unused] : kComparisons)
        if (peek().kind == Tok::op && peek().text == again)
          fail_at(text_, peek().column, "chained comparisons are not supported (numpy arrays have no truth value)");
      return ufunc(f, column, {left, right});
    }
    return left;
  }

  // One left-associative level of the grammar: next (op next)*.
  int left_associative(std::initializer_list<std::pair<std::string_view, Ufunc>> ops, int (Parser::*next)()) {
    int left = (this->*next)();
    while (peek().kind == Tok::op) {
      const auto op = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == peek().text; });
      if (op == ops.end()) break;
      const int column = peek().column;
      ++pos_;
      const int right = (this->*next)();
      left = ufunc(op->second, column, {left, right});
    }
    return left;
  }
  int arith() { return left_associative({{"+", Ufunc::add}, {"-", Ufunc::subtract}}, &Parser::term); }
  int term() { return left_associative({{"*", Ufunc::multiply}, {"/", Ufunc::divide}}, &Parser::factor); }

  int factor() {
    if (peek().kind == Tok::op && (peek().text == "-" || peek().text == "+")) {
      const bool minus = peek().text == "-";
      const int column = peek().column;
      ++pos_;
      const int operand = factor();
      if (!minus) return operand;  // unary plus: the value itself
      return ufunc(Ufunc::negative, column, {operand});
    }
    return power();
  }

  int power() {
    const int base = primary();
    if (peek().kind == Tok::op && peek().text == "**") {
      const int column = peek().column;
      ++pos_;
      const int node = ufunc(Ufunc::power, column, {base, factor()});
      nodes_[static_cast<std::size_t>(node)].power_operator = true;
      return node;
    }
    return base;
  }

  int primary() {
    const Token t = peek();
    if (t.kind == Tok::number) {
      ++pos_;
      Node n;
      n.kind = Node::Kind::constant;
      n.column = t.column;
      n.python = true;
      try {
        n.value = PyScalar::parse(t.text);
      } catch (const UsageError& e) {
        fail_at(text_, t.column, "bad number: " + e.problem());
      }
      return add(std::move(n));
    }
    if (t.kind == Tok::name) {
      ++pos_;
      if (accept("(")) return call(t);
      for (const Binding& b : bindings_) {
        if (b.name != t.text) continue;
        Node n;
        n.kind = Node::Kind::input;
        n.column = t.column;
        n.array = b.array;
        n.name = b.name;
        return add(std::move(n));
      }
      std::string known;
      for (const Binding& b : bindings_) known += (known.empty() ? "" : ", ") + b.name;
      fail_at(text_, t.column, "unknown name '" + t.text + "' (bound: " + (known.empty() ? "none" : known) + ")");
    }
    if (accept("(")) {
      const int inner = comparison();
      expect(")");
      return inner;
    }
    fail_at(text_, t.column, "expected an operand");
  }

  int call(const Token& name) {
    std::vector<int> args;
    if (!accept(")")) {
      do args.push_back(comparison());
      while (accept(","));
      expect(")");
    }
    auto arity = [&](std::size_t n) {
      if (args.size() != n)
        fail_at(text_, name.column, name.text + "() takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") +
                                        ", not " + std::to_string(args.size()));
    };
    static const std::pair<std::string_view, Ufunc> kUnary[] = {
        {"sqrt", Ufunc::sqrt}, {"exp", Ufunc::exp}, {"log", Ufunc::log},   {"log1p", Ufunc::log1p},
        {"expm1", Ufunc::expm1}, {"sin", Ufunc::sin}, {"cos", Ufunc::cos}, {"tanh", Ufunc::tanh},
        {"abs", Ufunc::absolute}};
    for (const auto& [fname, f] : kUnary) {
      if (fname != name.text) continue;
      arity(1);
      return ufunc(f, name.column, args);
    }
    if (name.text == "power") {  // np.power(x, y): the ufunc, without ndarray's ** fast paths
      arity(2);
      return ufunc(Ufunc::power, name.column, args);
    }
    if (name.text == "maximum" || name.text == "minimum") {
      arity(2);
      return ufunc(name.text == "maximum" ? Ufunc::maximum : Ufunc::minimum, name.column, args);
    }
    if (name.text == "clip") {
      arity(3);
      return ufunc(Ufunc::clip, name.column, args);
    }
    if (name.text == "where") {
      arity(3);
      Node n;
      n.kind = Node::Kind::where;
      n.column = name.column;
      n.args = args;
      return add(std::move(n));
    }
    if (is_reduction(name.text))
      fail_at(text_, name.column, name.text + "() must be the outermost call (a reduction makes one value)");
    fail_at(text_, name.column, "unknown function '" + name.text + "' (known: " + std::string(kFunctions) +
                                    "; outermost: " + std::string(kReductions) + ")");
  }

  std::string_view text_;
  const std::vector<Binding>& bindings_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
};

}  // namespace

int parse(std::string_view text, const std::vector<Binding>& bindings, std::vector<Node>& nodes,
          std::optional<std::pair<std::string, int>>& reduction) {
  Parser parser(text, bindings);
  const int root = parser.parse(reduction);
  nodes = std::move(parser.nodes_);
  return root;
}

}  // namespace ooc::kernels::expr_detail
