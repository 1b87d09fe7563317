# idiom: HistGradientBoostingRegressor on log1p(marketvalue) with country/category as pandas categories, name length and a few ratios as features; intended: valid
import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import cross_val_score

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")


def featurize(df, categories=None):
    out = pd.DataFrame(index=df.index)
    for col in ("sales", "assets"):
        out["log_" + col] = np.log1p(df[col])
    out["profits"] = df["profits"]
    out["margin"] = df["profits"] / df["sales"].clip(lower=0.01)
    out["roa"] = df["profits"] / df["assets"]
    out["name_len"] = df["name"].str.len()
    out["is_group"] = df["name"].str.contains("Group|Holding", case=False, regex=True).astype(int)
    for col in ("country", "category"):
        levels = categories[col] if categories else sorted(df[col].dropna().unique())
        out[col] = pd.Categorical(df[col], categories=levels)
    return out


X = featurize(train)
levels = {c: list(X[c].cat.categories) for c in ("country", "category")}
X_test = featurize(test, levels)
y = np.log1p(train["marketvalue"])

hgb = HistGradientBoostingRegressor(categorical_features="from_dtype", learning_rate=0.05, max_iter=300,
                                    min_samples_leaf=15, random_state=0)
print("CV RMSLE:", np.sqrt(-cross_val_score(hgb, X, y, cv=5, scoring="neg_mean_squared_error")).mean())
hgb.fit(X, y)
pd.DataFrame({"id": test["id"], "marketvalue": np.expm1(hgb.predict(X_test))}).to_csv("submission.csv", index=False)
