// The exchange model's text form and checks (lib/comm/exchange_model_spec.h).
#include "gradwire/lib/comm/exchange_model_spec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace gradwire {
namespace {

bool SameBits(const ExchangeModel& a, const ExchangeModel& b) {
  for (const ExchangeModelField& f : ExchangeModelFields()) {
    if (std::memcmp(&(a.*f.member), &(b.*f.member), sizeof(double)) != 0) return false;
  }
  return true;
}

TEST(ExchangeModelSpec, TableNamesEveryFieldOnce) {
  // Nine doubles, each reached by exactly one entry: setting each through
  // the table to a distinct value gives nine distinct members.
  ASSERT_EQ(ExchangeModelFields().size(), sizeof(ExchangeModel) / sizeof(double));
  ExchangeModel m;
  double v = 1;
  for (const ExchangeModelField& f : ExchangeModelFields()) m.*f.member = v++;
  EXPECT_EQ(m.bytes_per_second, 1);
  EXPECT_EQ(m.seconds_per_round, 2);
  EXPECT_EQ(m.encoded_elements_per_second, 3);
  EXPECT_EQ(m.decoded_entries_per_second, 4);
  EXPECT_EQ(m.reduced_entries_per_second, 5);
  EXPECT_EQ(m.streamed_elements_per_second, 6);
  EXPECT_EQ(m.seconds_per_message, 7);
  EXPECT_EQ(m.seconds_per_byte, 8);
  EXPECT_EQ(m.cores_per_rank, 9);
  EXPECT_TRUE(FindExchangeModelField("seconds_per_byte")->is_time);
  EXPECT_FALSE(FindExchangeModelField("cores_per_rank")->is_time);  // > 0, like a rate
  EXPECT_EQ(FindExchangeModelField("seconds_per_round")->member, &ExchangeModel::seconds_per_round);
  EXPECT_TRUE(FindExchangeModelField("seconds_per_round")->is_time);
  EXPECT_FALSE(FindExchangeModelField("bytes_per_second")->is_time);
  EXPECT_EQ(FindExchangeModelField("bytes"), nullptr);
}

TEST(ExchangeModelSpec, ParsesNamedFiguresOverTheBase) {
  absl::StatusOr<ExchangeModel> m =
      ParseExchangeModel("bytes_per_second=1.25e8,seconds_per_round=2e-4");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->bytes_per_second, 1.25e8);
  EXPECT_EQ(m->seconds_per_round, 2e-4);
  EXPECT_EQ(m->seconds_per_message, ExchangeModel().seconds_per_message);
  ExchangeModel base;
  base.decoded_entries_per_second = 7e7;
  m = ParseExchangeModel("seconds_per_message=0", base);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->decoded_entries_per_second, 7e7);
  EXPECT_EQ(m->seconds_per_message, 0);  // a time may be 0
  m = ParseExchangeModel("", base);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(SameBits(*m, base));
}

TEST(ExchangeModelSpec, ToStringRoundTripsExactly) {
  ExchangeModel m;
  m.bytes_per_second = 124999999.99999999;  // not 1.25e8 in a double? either way, exact
  m.seconds_per_round = 1.0 / 3;
  m.encoded_elements_per_second = std::nextafter(4e8, 5e8);
  m.seconds_per_message = 0;
  absl::StatusOr<ExchangeModel> back = ParseExchangeModel(ExchangeModelToString(m));
  ASSERT_TRUE(back.ok()) << back.status() << " " << ExchangeModelToString(m);
  EXPECT_TRUE(SameBits(*back, m)) << ExchangeModelToString(m);
  EXPECT_TRUE(CheckExchangeModel(m).ok());
}

TEST(ExchangeModelSpec, RefusesWhatCannotPredict) {
  const char* bad[] = {
      "bytes_per_second",                           // no '='
      "bytes_per_second=",                          // no number
      "bytes_per_second=fast",                      // not a number
      "bytes_per_second=1e8x",                      // trailing junk
      "bytes_per_second=0",                         // a rate must be > 0
      "bytes_per_second=-1",                        //
      "bytes_per_second=inf",                       // and finite
      "bytes_per_second=nan",                       //
      "seconds_per_round=-1e-6",                    // a time must be >= 0
      "seconds_per_message=inf",                    //
      "link=1e9",                                   // unknown name
      "bytes_per_second=1e8,bytes_per_second=2e8",  // repeated
      "bytes_per_second=1e8,",                      // an empty entry
      ",",                                          //
  };
  for (const char* text : bad) {
    absl::StatusOr<ExchangeModel> m = ParseExchangeModel(text);
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  EXPECT_NE(ParseExchangeModel("link=1e9").status().message().find("bytes_per_second"),
            std::string::npos)
      << "the error lists the names";
  EXPECT_NE(ParseExchangeModel("seconds_per_round=-1")
                .status()
                .message()
                .find("seconds_per_round must be a finite number >= 0"),
            std::string::npos);
  ExchangeModel m;
  m.streamed_elements_per_second = std::numeric_limits<double>::quiet_NaN();
  absl::Status s = CheckExchangeModel(m);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("streamed_elements_per_second"), std::string::npos) << s;
  EXPECT_TRUE(CheckExchangeModel(ExchangeModel()).ok());
}

}  // namespace
}  // namespace gradwire
