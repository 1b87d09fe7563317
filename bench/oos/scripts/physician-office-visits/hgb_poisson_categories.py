# idiom: HistGradientBoostingRegressor(loss='poisson') for a count target, string columns turned into pandas categories; intended: valid
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import train_test_split

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

string_cols = ["health", "adl", "region", "afam", "gender", "married", "employed", "insurance", "medicaid"]
for c in string_cols:
    cats = pd.CategoricalDtype(sorted(train[c].unique()))
    train[c] = train[c].astype(cats)
    test[c] = test[c].astype(cats)

features = [c for c in train.columns if c not in ("id", "visits")]
Xtr, Xva, ytr, yva = train_test_split(train[features], train["visits"], test_size=0.2, random_state=1)

reg = HistGradientBoostingRegressor(loss="poisson", learning_rate=0.04, max_iter=300, max_leaf_nodes=15,
                                    min_samples_leaf=30, categorical_features="from_dtype", random_state=1)
reg.fit(Xtr, ytr)
print("valid RMSE:", mean_squared_error(yva, reg.predict(Xva)) ** 0.5)

reg.fit(train[features], train["visits"])
pd.DataFrame({"id": test["id"], "visits": reg.predict(test[features])}).to_csv("submission.csv", index=False)
