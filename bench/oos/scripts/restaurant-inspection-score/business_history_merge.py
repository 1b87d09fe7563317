# idiom: pandas groupby().agg() of each business's past scores merged onto test, fallback to the chain size bucket and the global median; intended: valid
import pandas as pd

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

train["name_key"] = train["business_name"].str.upper().str.replace(r"[^A-Z ]", "", regex=True).str.strip()
test["name_key"] = test["business_name"].str.upper().str.replace(r"[^A-Z ]", "", regex=True).str.strip()

history = (train.groupby("name_key")["inspection_score"]
           .agg(["median", "count"])
           .rename(columns={"median": "hist_median", "count": "hist_n"})
           .reset_index())

train["size_bucket"] = pd.qcut(train["NumberofLocations"], 5, duplicates="drop")
bins = train["size_bucket"].cat.categories
test["size_bucket"] = pd.cut(test["NumberofLocations"], bins)
bucket_median = train.groupby("size_bucket", observed=True)["inspection_score"].median()

out = test.merge(history, on="name_key", how="left")
fallback = out["size_bucket"].map(bucket_median).astype(float)
global_median = train["inspection_score"].median()
# trust a business's own history only when it has a few inspections
out["inspection_score"] = out["hist_median"].where(out["hist_n"] >= 2, fallback).fillna(global_median)

print(out["inspection_score"].isna().sum(), "missing after fallback")
out[["id", "inspection_score"]].to_csv("submission.csv", index=False)
