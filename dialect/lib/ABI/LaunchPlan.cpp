//===- LaunchPlan.cpp - launch plans and their JSON manifest --------------===//
//
// Expression evaluation and the (nlohmann) JSON form of a launch plan.
//
//===----------------------------------------------------------------------===//
#include "condensate/ABI/LaunchPlan.h"

#include "condensate/Support/CheckedJSON.h"

namespace condensate {

using nlohmann::json;

namespace {
/// The element sizes a memref of the launch plans can have (i8 to f64).
bool validElementBytes(int64_t b) {
  return b == 1 || b == 2 || b == 4 || b == 8;
}
/// More arguments than any generated function takes.
constexpr int64_t kMaxFunctionArgs = 1024;
} // namespace

Result<int64_t>
Expr::eval(const std::vector<std::vector<int64_t>> &argShapes) const {
  switch (kind) {
  case Kind::Const:
    return value;
  case Kind::Dim:
    if (value < 0 || value >= static_cast<int64_t>(argShapes.size()) ||
        dim < 0 || dim >= static_cast<int64_t>(argShapes[value].size()))
      return Status::error("launch plan refers to arg" +
                           std::to_string(value) + ".dim" +
                           std::to_string(dim) + ", which is not given");
    return argShapes[value][dim];
  default:
    break;
  }
  if (operands.size() != 2)
    return Status::error("malformed launch plan expression");
  auto a = operands[0].eval(argShapes);
  if (!a.ok())
    return a;
  auto b = operands[1].eval(argShapes);
  if (!b.ok())
    return b;
  int64_t r = 0;
  switch (kind) {
  case Kind::Add:
    if (__builtin_add_overflow(*a, *b, &r))
      return Status::error("launch plan expression overflows: " + toString());
    return r;
  case Kind::Mul:
    if (__builtin_mul_overflow(*a, *b, &r))
      return Status::error("launch plan expression overflows: " + toString());
    return r;
  case Kind::CeilDiv:
    if (*b <= 0 || *a < 0)
      return Status::error("launch plan divides " + std::to_string(*a) +
                           " by " + std::to_string(*b) + ": " + toString());
    return *a / *b + (*a % *b != 0);
  case Kind::Max:
    return std::max(*a, *b);
  case Kind::Min:
    return std::min(*a, *b);
  default:
    return Status::error("malformed launch plan expression");
  }
}

static const char *kindName(Expr::Kind k) {
  switch (k) {
  case Expr::Kind::Add:
    return "add";
  case Expr::Kind::Mul:
    return "mul";
  case Expr::Kind::CeilDiv:
    return "ceildiv";
  case Expr::Kind::Max:
    return "max";
  case Expr::Kind::Min:
    return "min";
  default:
    return "?";
  }
}

std::string Expr::toString() const {
  if (kind == Kind::Const)
    return std::to_string(value);
  if (kind == Kind::Dim)
    return "arg" + std::to_string(value) + ".dim" + std::to_string(dim);
  return std::string(kindName(kind)) + "(" + operands[0].toString() + ", " +
         operands[1].toString() + ")";
}

namespace {

json exprToJSON(const Expr &e) {
  if (e.kind == Expr::Kind::Const)
    return e.value;
  if (e.kind == Expr::Kind::Dim)
    return json{{"arg", e.value}, {"dim", e.dim}};
  return json{{"op", kindName(e.kind)},
              {"lhs", exprToJSON(e.operands[0])},
              {"rhs", exprToJSON(e.operands[1])}};
}

Result<Expr> exprFromJSON(const json &j) {
  if (j.is_number_integer())
    return Expr::constant(j.get<int64_t>());
  if (j.is_object() && j.contains("arg") && j.contains("dim"))
    return Expr::argDim(j["arg"].get<int64_t>(), j["dim"].get<int64_t>());
  if (j.is_object() && j.contains("op") && j.contains("lhs") &&
      j.contains("rhs")) {
    std::string op = j["op"].get<std::string>();
    Expr::Kind k;
    if (op == "add")
      k = Expr::Kind::Add;
    else if (op == "mul")
      k = Expr::Kind::Mul;
    else if (op == "ceildiv")
      k = Expr::Kind::CeilDiv;
    else if (op == "max")
      k = Expr::Kind::Max;
    else if (op == "min")
      k = Expr::Kind::Min;
    else
      return Status::error("manifest: unknown expression op '" + op + "'");
    auto a = exprFromJSON(j["lhs"]);
    if (!a.ok())
      return a;
    auto b = exprFromJSON(j["rhs"]);
    if (!b.ok())
      return b;
    return Expr::binary(k, *a, *b);
  }
  return Status::error("manifest: malformed expression " + j.dump());
}

json exprsToJSON(const std::vector<Expr> &v) {
  json a = json::array();
  for (const Expr &e : v)
    a.push_back(exprToJSON(e));
  return a;
}

Result<std::vector<Expr>> exprsFromJSON(const json &j) {
  std::vector<Expr> out;
  if (!j.is_array())
    return Status::error("manifest: expected an array of expressions");
  for (const json &e : j) {
    auto x = exprFromJSON(e);
    if (!x.ok())
      return x.status();
    out.push_back(*x);
  }
  return out;
}

} // namespace

std::string LaunchPlan::toJSON() const {
  json j;
  j["format"] = "condensate-launch-plan-1";
  j["target"] = target;
  j["layers"] = layers;
  j["append"] = append;
  j["prefill"] = prefill;
  j["adaptive"] = adaptive;
  json fns = json::object();
  for (const auto &[name, fn] : functions) {
    json f;
    f["num_args"] = fn.numArgs;
    json scratch = json::array();
    for (const ScratchBuffer &s : fn.scratch)
      scratch.push_back({{"element_type", s.elementType},
                         {"element_bytes", s.elementBytes},
                         {"shape", exprsToJSON(s.shape)}});
    f["scratch"] = scratch;
    json launches = json::array();
    for (const KernelLaunch &l : fn.launches) {
      json params = json::array();
      for (const MemRefParam &p : l.params)
        params.push_back(
            {{"buffer", p.buffer.kind == BufferRef::Kind::Argument
                            ? "arg"
                            : "scratch"},
             {"index", p.buffer.index},
             {"element_type", p.elementType},
             {"element_bytes", p.elementBytes},
             {"offset", exprToJSON(p.offset)},
             {"sizes", exprsToJSON(p.sizes)},
             {"strides", exprsToJSON(p.strides)}});
      launches.push_back(
          {{"kernel", l.kernel},
           {"grid", exprsToJSON({l.grid[0], l.grid[1], l.grid[2]})},
           {"block", l.block},
           {"shared_bytes", l.sharedBytes},
           {"grid_dependency", l.gridDependency},
           {"params", params}});
    }
    f["launches"] = launches;
    fns[name] = f;
  }
  j["functions"] = fns;
  return j.dump(1);
}

Result<LaunchPlan> LaunchPlan::fromJSON(const std::string &text) {
  auto parsed = parseCheckedJSON(text, "manifest");
  if (!parsed.ok())
    return parsed.status();
  json j = parsed.take();
  if (!j.is_object())
    return Status::error("manifest: not a JSON object");
  if (j.value("format", "") != "condensate-launch-plan-1")
    return Status::error("manifest: not a condensate launch plan (format " +
                         j.value("format", std::string("missing")) + ")");
  try {
    LaunchPlan plan;
    plan.target = j.at("target").get<std::string>();
    plan.layers = j.at("layers").get<std::vector<std::string>>();
    plan.append = j.at("append").get<std::string>();
    if (j.contains("prefill"))
      plan.prefill = j.at("prefill").get<std::vector<std::string>>();
    plan.adaptive = j.at("adaptive").get<std::vector<int64_t>>();
    for (auto it = j.at("functions").begin(); it != j.at("functions").end();
         ++it) {
      FunctionPlan fn;
      fn.name = it.key();
      fn.numArgs = it->at("num_args").get<int64_t>();
      if (fn.numArgs < 0 || fn.numArgs > kMaxFunctionArgs)
        return Status::error("manifest: function " + fn.name + " has " +
                             std::to_string(fn.numArgs) + " arguments");
      for (const json &s : it->at("scratch")) {
        ScratchBuffer b;
        b.elementType = s.at("element_type").get<std::string>();
        b.elementBytes = s.at("element_bytes").get<int64_t>();
        if (!validElementBytes(b.elementBytes))
          return Status::error("manifest: scratch buffer " +
                               std::to_string(fn.scratch.size()) + " of " +
                               fn.name + " has element_bytes " +
                               std::to_string(b.elementBytes));
        auto shape = exprsFromJSON(s.at("shape"));
        if (!shape.ok())
          return shape.status();
        b.shape = *shape;
        fn.scratch.push_back(b);
      }
      for (const json &l : it->at("launches")) {
        KernelLaunch launch;
        launch.kernel = l.at("kernel").get<std::string>();
        auto grid = exprsFromJSON(l.at("grid"));
        if (!grid.ok() || grid->size() != 3)
          return Status::error("manifest: kernel " + launch.kernel +
                               " has a malformed grid");
        launch.grid = {(*grid)[0], (*grid)[1], (*grid)[2]};
        auto block = l.at("block").get<std::vector<int64_t>>();
        if (block.size() != 3)
          return Status::error("manifest: kernel " + launch.kernel +
                               " has a malformed block");
        launch.block = {block[0], block[1], block[2]};
        launch.sharedBytes = l.at("shared_bytes").get<int64_t>();
        // No chip offers a block more than a few hundred KB.
        if (launch.sharedBytes < 0 || launch.sharedBytes > (int64_t(1) << 20))
          return Status::error("manifest: kernel " + launch.kernel +
                               " asks for " +
                               std::to_string(launch.sharedBytes) +
                               " bytes of dynamic shared memory");
        if (l.contains("grid_dependency"))
          launch.gridDependency = l.at("grid_dependency").get<bool>();
        for (const json &p : l.at("params")) {
          MemRefParam m;
          std::string kind = p.at("buffer").get<std::string>();
          if (kind != "arg" && kind != "scratch")
            return Status::error("manifest: unknown buffer kind " + kind);
          m.buffer.kind = kind == "arg" ? BufferRef::Kind::Argument
                                        : BufferRef::Kind::Scratch;
          m.buffer.index = p.at("index").get<int64_t>();
          int64_t buffers = kind == "arg"
                                ? fn.numArgs
                                : static_cast<int64_t>(fn.scratch.size());
          if (m.buffer.index < 0 || m.buffer.index >= buffers)
            return Status::error("manifest: kernel " + launch.kernel +
                                 " reads " + kind + " " +
                                 std::to_string(m.buffer.index) + " of " +
                                 std::to_string(buffers));
          m.elementType = p.at("element_type").get<std::string>();
          m.elementBytes = p.at("element_bytes").get<int64_t>();
          if (!validElementBytes(m.elementBytes))
            return Status::error("manifest: kernel " + launch.kernel +
                                 " has a parameter of element_bytes " +
                                 std::to_string(m.elementBytes));
          auto off = exprFromJSON(p.at("offset"));
          auto sizes = exprsFromJSON(p.at("sizes"));
          auto strides = exprsFromJSON(p.at("strides"));
          if (!off.ok() || !sizes.ok() || !strides.ok() ||
              sizes->size() != strides->size())
            return Status::error("manifest: kernel " + launch.kernel +
                                 " has a malformed parameter");
          m.offset = *off;
          m.sizes = *sizes;
          m.strides = *strides;
          launch.params.push_back(m);
        }
        fn.launches.push_back(launch);
      }
      plan.functions[fn.name] = fn;
    }
    for (const std::string &l : plan.layers)
      if (!plan.functions.count(l))
        return Status::error("manifest: layer function " + l + " missing");
    if (!plan.functions.count(plan.append))
      return Status::error("manifest: append function " + plan.append +
                           " missing");
    return plan;
  } catch (const json::exception &e) {
    return Status::error(std::string("manifest: ") + e.what());
  }
}

} // namespace condensate
