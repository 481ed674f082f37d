// The small pieces every drill check uses: a claim request without delivery, a check's result,
// the books of a drill copy (drill_internal.hpp).
#include "jobs/drill/internal.hpp"

namespace rc::jobs::drill {

using json = nlohmann::json;
using activity::Definition;
using activity::Kind;
using activity::PrizeDef;

engine::ClaimRequest request(const std::string& code, const std::string& user, const std::string& biz) {
  engine::ClaimRequest r;
  r.activity = code;
  r.user = user;
  r.biz_id = biz;
  r.deliver = false;
  return r;
}

Check result(bool pass, std::string detail, json figures) {
  Check c;
  c.result = pass ? "pass" : "fail";
  c.detail = std::move(detail);
  c.figures = std::move(figures);
  return c;
}

Check not_applicable(std::string why) {
  Check c;
  c.result = "n/a";
  c.detail = std::move(why);
  return c;
}

std::map<std::string, PrizeBook> books(Drill& x, const std::string& code) {
  std::map<std::string, PrizeBook> out;
  for (auto& r : x.sc.st
                     ->query("SELECT p.code, (SELECT coalesce(sum(s.remain), 0) FROM stock s WHERE s.prize_id = p.id), "
                             "(SELECT coalesce(sum(s.total), 0) FROM stock s WHERE s.prize_id = p.id), "
                             "(SELECT count(*) FROM grants g WHERE g.prize_id = p.id), "
                             "(SELECT count(*) FROM grants g WHERE g.prize_id = p.id AND g.degraded_from IS NOT NULL) "
                             "FROM prize p JOIN activity a ON a.id = p.activity_id WHERE a.code = $1 ORDER BY p.id",
                             {code})
                     .rows) {
    auto& b = out[r.str(0)];
    b.remain = r.i64(1);
    b.total = r.i64(2);
    b.granted = r.i64(3);
    b.degraded = r.i64(4);
  }
  return out;
}

// The prizes a claim can end on: direct and redpack claims name them, a lottery draws those with a
// weight and degrades to its consolation prize.
bool reachable(const Definition& d, const PrizeDef& p) {
  if (d.kind != Kind::lottery) return true;
  return p.weight > 0 || (d.consolation && *d.consolation == p.code);
}

}  // namespace rc::jobs::drill
