# idiom: week of year via Series.dt.week (removed in pandas 2.0), RandomForest on label-encoded columns; intended: crash (AttributeError)
import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from sklearn.preprocessing import LabelEncoder

train = pd.read_csv("data/train.csv", parse_dates=["arrival_date"])
test = pd.read_csv("data/test.csv", parse_dates=["arrival_date"])

for df in [train, test]:
    df["arrival_month"] = df["arrival_date"].dt.month
    df["arrival_week"] = df["arrival_date"].dt.week
    df["arrival_dow"] = df["arrival_date"].dt.dayofweek

obj_cols = ["meal", "country", "market_segment", "distribution_channel", "reserved_room_type",
            "assigned_room_type", "agent", "company", "customer_type"]
for col in obj_cols:
    le = LabelEncoder().fit(pd.concat([train[col], test[col]]).astype(str))
    train[col] = le.transform(train[col].astype(str))
    test[col] = le.transform(test[col].astype(str))

features = [c for c in train.columns if c not in ["id", "avg_price_per_room", "arrival_date"]]
rf = RandomForestRegressor(n_estimators=300, min_samples_leaf=2, n_jobs=1, random_state=42)
rf.fit(train[features], train["avg_price_per_room"])
pd.DataFrame({"id": test["id"], "avg_price_per_room": rf.predict(test[features])}).to_csv("submission.csv", index=False)
