# idiom: classic Kaggle Titanic notebook: title extracted from the name with a regex, age imputed by title median, GradientBoosting; intended: valid
import pandas as pd
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.model_selection import cross_val_score

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
full = pd.concat([train, test], sort=False, ignore_index=True)

full["Title"] = full["name"].str.extract(r",\s*([^\.]+)\.", expand=False).str.strip()
full["Title"] = full["Title"].replace(["Mlle", "Ms"], "Miss").replace("Mme", "Mrs")
rare = full["Title"].value_counts()[lambda s: s < 10].index
full.loc[full["Title"].isin(rare), "Title"] = "Rare"

full["age"] = full["age"].fillna(full.groupby("Title")["age"].transform("median"))
full["age"] = full["age"].fillna(full["age"].median())
full["IsChild"] = (full["age"] < 14).astype(int)
full["Sex"] = (full["sex"] == "female").astype(int)
full["Pclass"] = full["passengerClass"].str[0].astype(int)
full["SurnameLen"] = full["name"].str.split(",").str[0].str.len()

data = pd.get_dummies(full[["Sex", "Pclass", "age", "IsChild", "SurnameLen", "Title"]], columns=["Title"], dtype=int)
X_train = data.iloc[: len(train)]
X_test = data.iloc[len(train):]
y = train["survived"]

gb = GradientBoostingClassifier(n_estimators=200, max_depth=3, learning_rate=0.05, random_state=1)
print("CV accuracy: %.4f" % cross_val_score(gb, X_train, y, cv=5).mean())
gb.fit(X_train, y)

submission = pd.DataFrame({"id": test["id"], "survived": gb.predict(X_test)})
submission.to_csv("submission.csv", index=False)
print(submission["survived"].value_counts(normalize=True))
