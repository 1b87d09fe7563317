# idiom: the school id and the three string columns as pandas categoricals for HistGradientBoostingRegressor's native categorical splits, KFold RMSE printed with cross_val_score('neg_root_mean_squared_error'); intended: valid
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import KFold, cross_val_score

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

for col in ["school", "minrty", "sx", "sector"]:
    categories = sorted(train[col].unique())
    train[col] = pd.Categorical(train[col], categories=categories)
    test[col] = pd.Categorical(test[col], categories=categories)

features = ["school", "minrty", "sx", "sector", "ses", "meanses", "cses"]
model = HistGradientBoostingRegressor(learning_rate=0.05, max_iter=200, max_leaf_nodes=15, min_samples_leaf=40,
                                      l2_regularization=1.0, random_state=0)
rmse = -cross_val_score(model, train[features], train["mAch"], cv=KFold(5, shuffle=True, random_state=0),
                        scoring="neg_root_mean_squared_error")
print("CV RMSE: %.3f" % rmse.mean())

model.fit(train[features], train["mAch"])
pd.DataFrame({"id": test["id"], "mAch": model.predict(test[features])}).to_csv("submission.csv", index=False)
