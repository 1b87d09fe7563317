# idiom: pd.to_datetime on the arrival date, month/week/weekday parts via .dt.isocalendar(), OrdinalEncoder for strings, HistGradientBoosting; intended: valid
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OrdinalEncoder

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")


def date_parts(df):
    d = pd.to_datetime(df["arrival_date"])
    df = df.drop(columns=["arrival_date"])
    df["month"] = d.dt.month
    df["week"] = d.dt.isocalendar().week.astype(int)
    df["weekday"] = d.dt.weekday
    df["nights"] = df["stays_in_weekend_nights"] + df["stays_in_week_nights"]
    return df


train, test = date_parts(train), date_parts(test)
target = "avg_price_per_room"
features = [c for c in train.columns if c not in ("id", target)]
strings = [c for c in features if not pd.api.types.is_numeric_dtype(train[c])]
# the ColumnTransformer puts the encoded string columns first, then the rest
is_categorical = [True] * len(strings) + [False] * (len(features) - len(strings))

model = Pipeline([
    ("enc", ColumnTransformer([("str", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1,
                                                      encoded_missing_value=-2), strings)],
                              remainder="passthrough", verbose_feature_names_out=False)),
    ("hgb", HistGradientBoostingRegressor(max_iter=400, learning_rate=0.05,
                                          categorical_features=is_categorical,
                                          random_state=0)),
])
scores = cross_val_score(model, train[features], train[target], cv=3, scoring="neg_root_mean_squared_error")
print("CV RMSE:", -scores.mean())
model.fit(train[features], train[target])
pd.DataFrame({"id": test["id"], target: model.predict(test[features])}).to_csv("submission.csv", index=False)
